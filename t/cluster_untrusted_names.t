#!/usr/bin/perl

# Records for names a node does not have (issue 23, finding 1): two nodes
# and a real redis-server; a hostile writer SETs and PUBLISHes valid
# records for providers and connections neither node has - 100 settings
# overrides, 8,000 terminal connection states, lockouts, pins.  None is
# stored (the zone does not fill, nothing protective is evicted: an open
# breaker, a cooldown and a lockout stay), none is written back to Redis
# after it is deleted there, each is counted in
# omniroute_redis_records_rejected_total and logged at a bounded rate.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP;
use POSIX ();
use Time::HiRes qw(sleep time);
use OmniTest;
use RedisServer;
use OmniCluster qw(:all);

OmniTest::need(RedisServer::available(), 'redis-server not installed');

my $TOKEN = 'untrusted-0123456789-abcdef';
$ENV{OMNI_TEST_API_TOKEN} = $OmniCluster::API_TOKEN = $TOKEN;

my ($na, $redis, $nb, $m) = OmniCluster::pair(
    test => { test_build => 1 },
    files => { 'key-a1' => "sk-a1\n", 'key-a2' => "sk-a2\n",
               'key-b1' => "sk-b1\n" });

sub node_config {
    my ($n, $name) = @_;
    OmniCluster::node_config($n, addr => $redis->addr, name => $name,
        prefix => 't50:', redis_opts => 'resync=1s log_interval=2s',
        body => $OmniCluster::UNTRUSTED_BODY,
        server => { debug => 1, api => 'token' });
}

# the wire format: OmniCluster (value, message, breaker, conn, ...)

my $NOW = $OmniCluster::NOW = int(time * 1000);
my $MAX = $OmniCluster::MAX;
my $MIN = $OmniCluster::MIN;

# redis-cli -x: the last argument (the value, the message) from stdin
sub cli { return $redis->cli_x(@_); }


OmniCluster::start_nodes(\&node_config, $na => 'node-a', $nb => 'node-b');

ok(links_up($na, $nb), 'both links up');

# the protective state the junk must not evict

rec($na, 'table=breaker&key=beta&op=open&ms=600000&n=8');
rec($na, 'table=conn&key=a2&op=cooldown&ms=600000');
rec($na, 'table=lockout&key=alpha:a1:exact:m&op=lock&ms=600000&n=3');

ok(wait_for(sub { (rec($nb, 'table=breaker&key=beta')->{state} // '')
                  eq 'OPEN'
                  && rec($nb, 'table=conn&key=a2')->{found}
                  && rec($nb, 'table=lockout&key=alpha:a1:exact:m')->{found} }),
   'an open breaker, a cooldown and a lockout, shared');

my $r0 = (stats($na)->{rejected} // 0);
my $t0 = time;

# 100 settings overrides for unknown providers, SET and published

my $ov = value('settings', override(1 => 5));
my $lua_set = "for i = 1, tonumber(ARGV[3]) do redis.call('SET', "
              . "string.format(ARGV[1], i), ARGV[2]) end return 1";
is($redis->cmd('EVAL', $lua_set, 0, 't50:settings:provider:nope%03d', $ov,
               100), 1, '100 settings records for unknown providers SET');
for my $i (1 .. 3) {
    cli(message('settings', sprintf('provider:nope%03d', $i),
                override(1 => 5)), 'PUBLISH', 't50:events:0');
}

# 8,000 terminal states for unknown connection ids, SET and published

my $term = conn(terminal => 1, terminal_at => $NOW, last_status => 401,
                last_reason => 3);
is($redis->cmd('EVAL', $lua_set, 0, 't50:conn:zz%04d', value('conn', $term),
               8000), 1, '8,000 terminal states for unknown connections SET');
my ($head, $tail) = split /KKKKKK/, message('conn', 'KKKKKK', $term);
is($redis->cmd('EVAL', "for i = 1, 8000 do redis.call('PUBLISH', KEYS[1], "
               . "ARGV[1] .. string.format('zz%04d', i) .. ARGV[2]) end "
               . "return 1", 1, 't50:events:0', $head, $tail), 1,
   'and published');

# a lockout and a pin naming what the nodes do not have

cli(value('lockout', lockout(failures => 3, mark_at => $NOW,
                             until => $NOW + 600_000, last_failure_at => $NOW,
                             last_status => 429, reason => 1, scope => 2)),
    'SET', 't50:lockout:nope:a1:exact:m');
cli(value('lockout', lockout(failures => 3, mark_at => $NOW,
                             until => $NOW + 600_000, last_failure_at => $NOW,
                             last_status => 429, reason => 1, scope => 2)),
    'SET', 't50:lockout:alpha:nope:exact:m');
cli(value('pin', pin(set_at => $NOW, until => $NOW + 600_000, hash => 1,
                     conn => 'nope')),
    'SET', 't50:pin:alpha/m|00ff');

ok(wait_for(sub { (stats($na)->{rejected} // 0) >= $r0 + 8000 + 100 + 3
                  && (stats($nb)->{rejected} // 0) >= $r0 + 8000 + 100 + 3 },
            30),
   'both nodes reject them (' . ((stats($na)->{rejected} // 0) - $r0)
   . ' / ' . ((stats($nb)->{rejected} // 0) - $r0) . ')');

for my $n ($na, $nb) {
    my $name = $n == $na ? 'A' : 'B';
    is(metric($n, 'omniroute_zone_alloc_failures_total') // 0, 0,
       "$name: no allocation failed");
    cmp_ok(metric($n, 'omniroute_zone_records{table="conn"}') // 0, '<=', 3,
           "$name: no connection state stored for them");
    cmp_ok(metric($n, 'omniroute_zone_records{table="settings"}') // 0, '<=',
           3, "$name: no settings record stored for them");
    ok(!rec($n, 'table=conn&key=zz0001')->{found}, "$name: zz0001 unknown");
    ok(!rec($n, 'table=lockout&key=nope:a1:exact:m')->{found},
       "$name: no lockout of an unknown provider");
    ok(!rec($n, 'table=lockout&key=alpha:nope:exact:m')->{found},
       "$name: nor of an unknown connection");
    ok(!rec($n, 'table=pin&key=alpha/m|00ff')->{found},
       "$name: no pin to an unknown connection");
    is(rec($n, 'table=breaker&key=beta')->{state}, 'OPEN',
       "$name: the open breaker stays");
    ok(rec($n, 'table=conn&key=a2')->{found}, "$name: the cooldown stays");
    ok(rec($n, 'table=lockout&key=alpha:a1:exact:m')->{found},
       "$name: the lockout stays");
}

cmp_ok(metric($na, 'omniroute_redis_records_rejected_total') // 0, '>=',
       8100, '/metrics: omniroute_redis_records_rejected_total');

# deleted in Redis, never written back

$redis->cmd('EVAL', "for _, k in ipairs(redis.call('KEYS', ARGV[1])) do "
            . "redis.call('DEL', k) end return 1", 0, 't50:*nope*');
$redis->cmd('EVAL', "for _, k in ipairs(redis.call('KEYS', ARGV[1])) do "
            . "redis.call('DEL', k) end return 1", 0, 't50:conn:zz*');
$redis->cmd('DEL', 't50:pin:alpha/m|00ff');
my $s0 = stats($na)->{syncs};
ok(wait_for(sub { stats($na)->{syncs} >= $s0 + 2
                  && stats($nb)->{syncs} >= $s0 + 2 }, 10),
   'two full loads later');
is_deeply([grep { /nope|zz\d{4}/ } $redis->keys('t50:*')], [],
          'none of them is back in Redis');

# a bounded log

my $elapsed = time - $t0;
for my $n ($na, $nb) {
    my @l = grep { /rejected an invalid record/ } split /\n/, $n->error_log;
    cmp_ok(scalar(@l), '<=', int($elapsed / 2) + 1,
           scalar(@l) . sprintf(' log lines in %.1f s', $elapsed));
}
like($na->error_log, qr/\(bad name: no such (?:provider|connection) here\)/,
     'the reason is the name');

$m->clear;
isnt(chat($na)->{status}, 200,
     'A: a1 locked out for m, a2 cooling: the request is refused');
is(scalar @{$m->requests}, 0, 'and the provider saw nothing');

$nb->done;
$na->done;
$redis->stop;

done_testing;
