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

OmniTest::need(RedisServer::available(), 'redis-server not installed');

my $TOKEN = 'untrusted-0123456789-abcdef';
$ENV{OMNI_TEST_API_TOKEN} = $TOKEN;

my $na = OmniTest->new(test_build => 1);
my $redis = RedisServer->new($na)->start;
my $nb = RedisServer::cluster_node($na, 'b');
my $m = $na->mock('p');

$nb->{ports}{mock_p} = $na->port('mock_p');

for my $n ($na, $nb) {
    $n->write_file('key-a1', "sk-a1\n");
    $n->write_file('key-a2', "sk-a2\n");
    $n->write_file('key-b1', "sk-b1\n");
}

sub node_config {
    my ($n, $name) = @_;

    $n->config(<<"EOF");
    omniroute_zone zone=omniroute:1m;
    omniroute_redis ${\ $redis->addr} node=$name prefix=t50: timeout=1s
                    backoff=20ms backoff_max=200ms resync=1s
                    log_interval=2s;

    omniroute_provider alpha url=http://127.0.0.1:%%PORT_mock_p%%/alpha
                       kind=apikey;
    omniroute_provider beta url=http://127.0.0.1:%%PORT_mock_p%%/beta;
    omniroute_provider delta url=http://127.0.0.1:%%PORT_mock_p%%/delta;

    omniroute_connection a1 provider=alpha key_file=%%TESTDIR%%/key-a1
                         priority=1;
    omniroute_connection a2 provider=alpha key_file=%%TESTDIR%%/key-a2
                         priority=2;
    omniroute_connection b1 provider=beta key_file=%%TESTDIR%%/key-b1;

    omniroute_session_affinity 10m;

    server {
        listen 127.0.0.1:%%PORT_gw%%;

        location /v1/ {
            omniroute_pass;
        }

        location /_omniroute {
            internal;
            include %%PARAMS%%;
        }

        location /debug {
            omniroute_redis_debug;
        }

        location / {
            omniroute_api;
            omniroute_api_token env=OMNI_TEST_API_TOKEN;
        }
    }
EOF
}

sub gw { $_[0]->port('gw') }

sub rec {
    my ($n, $q) = @_;
    my $r = $n->get(gw($n), "/debug?$q");
    return eval { decode_json($r->{body}) } || { error => $r->{body} };
}

sub stats { rec($_[0], '') }

sub api {
    my ($n, $method, $path) = @_;
    my $r = $n->http(gw($n), OmniTest::request_text($method, $path, undef,
                     Authorization => "Bearer $TOKEN"));
    $r->{json} = eval { decode_json($r->{body}) };
    return $r;
}

sub metric {
    my ($n, $name) = @_;
    my $body = api($n, 'GET', '/metrics')->{body} // '';
    return $body =~ /^\Q$name\E (\S+)$/m ? $1 : undef;
}

sub wait_for {
    my ($cond, $timeout) = @_;
    my $t0 = time;
    while (time - $t0 < ($timeout // 5)) {
        return 1 if $cond->();
        sleep(0.02);
    }
    return 0;
}

sub chat {
    my ($n, %h) = @_;
    return $n->post(gw($n), '/v1/chat/completions',
                    { model => 'alpha/m', messages => [] }, %h);
}

###########################################################################
# the wire format (src/core/or_wire.h) and the states (src/core/or_*.h),
# x86-64 layouts

my %TABLE = (breaker => 0, conn => 1, lockout => 2, rejected => 3,
             settings => 5, pin => 6);
my $NOW = int(time * 1000);
my $MAX = 9223372036854775807;
my $MIN = -9223372036854775807 - 1;

# "OR" version table | size | time | state
sub value {
    my ($table, $state, $time) = @_;
    return pack('a2CCVq<', 'OR', 1, $TABLE{$table}, length $state,
                $time // $NOW) . $state;
}

# "OR" version op table node_len key_len 0 | time | size | 0 | node key state
sub message {
    my ($table, $key, $state, %o) = @_;
    my $node = $o{node} // 'evil';
    return pack('a2CCCCCCq<VV', 'OR', 1, 0, $TABLE{$table}, length $node,
                length $key, 0, $o{time} // $NOW, length $state, 0)
           . $node . $key . $state;
}

# or_breaker_t, 320 bytes
sub breaker {
    my (%f) = @_;
    my @ring = @{$f{ring} // []};
    push @ring, 0 while @ring < 32;
    return pack('VVq<q<q<q<q<', $f{epoch} // 0, $f{gate_epoch} // 0,
                $f{last_failure_at} // 0, $f{opened_at} // 0,
                $f{open_until} // 0, $f{probe_until} // 0,
                $f{gate_until} // 0)
           . pack('q<32', @ring)
           . pack('VvvCCCCV', $f{failures} // 0, $f{open_cycles} // 0,
                  $f{successes} // 0, $f{state} // 0, $f{last_reason} // 0,
                  $f{ring_len} // 0, 0, $f{reserved1} // 0);
}

# or_conn_state_t, 56 bytes
sub conn {
    my (%f) = @_;
    return pack('VVq<q<q<q<VvvvssCC', $f{reset_epoch} // 0,
                $f{clear_epoch} // 0, $f{terminal_at} // 0, $f{until} // 0,
                $f{mark_at} // 0, $f{last_error_at} // 0, $f{failures} // 0,
                $f{backoff_level} // 0, 0, 0, $f{last_status} // 0, 0,
                $f{terminal} // 0, $f{last_reason} // 0);
}

# or_lockout_t, 48 bytes
sub lockout {
    my (%f) = @_;
    return pack('VVq<q<q<q<sCCV', $f{epoch} // 0, $f{failures} // 0,
                $f{until} // 0, $f{mark_at} // 0, $f{last_failure_at} // 0,
                $f{decay_at} // 0, $f{last_status} // 0, $f{reason} // 0,
                $f{scope} // 0, 0);
}

# or_pin_t, 152 bytes
sub pin {
    my (%f) = @_;
    return pack('q<q<VvvZ128', $f{set_at}, $f{until}, $f{hash},
                length $f{conn}, 0, $f{conn});
}

# ngx_omniroute_settings_override_t, 488 bytes: set, value[48], n_codes,
# codes[16], catchall, its reason and scope, reserved, its cooldown
sub override {
    my (%v) = @_;
    my ($set, @value) = (0, (0) x 48);
    for my $i (keys %v) {
        $set |= 1 << $i;
        $value[$i] = $v{$i};
    }
    return pack('Q<q<48l<l<16l<l<l<l<x4q<', $set, @value, 0, (0) x 16,
                0, 0, 0, 0, -1);
}

# redis-cli -x: the last argument (the value, the message) from stdin
sub cli { return $redis->cli_x(@_); }


node_config($na, 'node-a');
node_config($nb, 'node-b');

$na->run(gw($na));
$nb->run(gw($nb));

ok(wait_for(sub { (stats($na)->{state} // '') eq 'up'
                  && (stats($nb)->{state} // '') eq 'up' }),
   'both links up');

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
