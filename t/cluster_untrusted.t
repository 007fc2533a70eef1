#!/usr/bin/perl

# Remote records are untrusted input (issue 12): hostile values written
# straight into Redis with redis-cli (SET of state keys, PUBLISH on the
# events channel) - a breaker with ring_len 255, a cooldown until
# INT64_MAX, a lockout whose mark_at overflowed the request path, a pin
# with a forged hash, a settings override below its range, a value of the
# wrong size, a message with an origin time of INT64_MIN - are rejected by
# both nodes: the rejected counter moves (JSON stats and /metrics), one
# rate-limited warning per log_interval names the table and key and never
# a value, gateway and admin requests are served as before, and the state
# is unchanged.

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
        prefix => 't26:', redis_opts => 'resync=1s log_interval=2s',
        body => $OmniCluster::UNTRUSTED_BODY,
        server => { debug => 1, api => 'token' });
}

# the wire format: OmniCluster (value, message, breaker, conn, ...)

my $NOW = $OmniCluster::NOW = int(time * 1000);
my $MAX = $OmniCluster::MAX;
my $MIN = $OmniCluster::MIN;

# redis-cli -x: the last argument (the value, the message) from stdin
sub cli { return $redis->cli_x(@_); }

###########################################################################

OmniCluster::start_nodes(\&node_config, $na => 'node-a', $nb => 'node-b');

ok(links_up($na, $nb), 'both links up');

# the state the hostile records must not change

rec($na, 'table=breaker&key=beta&op=open&ms=60000&n=8');
rec($na, 'table=conn&key=a2&op=cooldown&ms=60000');

ok(wait_for(sub { (rec($nb, 'table=breaker&key=beta')->{state} // '')
                  eq 'OPEN'
                  && rec($nb, 'table=conn&key=a2')->{found} }),
   'a breaker and a cooldown are shared');

is(length($redis->cmd('GET', 't26:breaker:beta') // ''), 16 + 320,
   'the breaker value in Redis has the size the tests assume');
is(length($redis->cmd('GET', 't26:conn:a2') // ''), 16 + 56,
   'and so has the connection value');

my %before;
for my $n ($na, $nb) {
    $before{$n} = {
        beta => rec($n, 'table=breaker&key=beta'),
        a2 => rec($n, 'table=conn&key=a2'),
        threshold => api($n, 'GET', '/api/resilience')->{json}{providers}
                     {alpha}{breaker}{open_threshold},
    };
}

is(chat($na)->{status}, 200, 'A serves alpha (a1) before');
my $rejected0 = stats($na)->{rejected};
is($rejected0, 0, 'nothing rejected yet');

###########################################################################
# hostile records

my $SECRET = 'SECRETVA';
my $mark = unpack('q<', $SECRET);
my $t_first = time;

# controls: valid records in the same layouts are taken

cli(message('breaker', 'delta', breaker(state => 2, failures => 3,
                                        opened_at => $NOW,
                                        open_until => $NOW + 600_000,
                                        last_failure_at => $NOW)),
    'PUBLISH', 't26:events:0');
ok(wait_for(sub { (rec($na, 'table=breaker&key=delta')->{state} // '')
                  eq 'OPEN' }),
   'control: a valid published breaker is applied');
cli(value('settings', override(1 => 5)), 'SET',
    't26:settings:provider:beta');
ok(wait_for(sub { (api($nb, 'GET', '/api/resilience')->{json}{providers}
                   {beta}{breaker}{open_threshold} // 0) == 5 }, 5),
   'control: a valid settings override in Redis is loaded');

# published: a breaker with ring_len 255 and a huge epoch (would win)
my $evil_breaker = breaker(epoch => 1000, state => 2, failures => 99,
                           opened_at => $NOW, open_until => $NOW + 3600_000,
                           last_failure_at => $NOW, ring_len => 255,
                           ring => [$mark, 3, 2, 1]);
like(cli(message('breaker', 'alpha', $evil_breaker), 'PUBLISH',
         't26:events:0'), qr/^2$/, 'PUBLISH a ring_len 255 breaker for alpha');

# published: a message with an origin time of INT64_MIN (the lag)
cli(message('conn', 'a1', conn(), time => $MIN), 'PUBLISH', 't26:events:0');

# SET, read by every full load (resync=1s)
is(cli(value('breaker', $evil_breaker), 'SET', 't26:breaker:alpha'), 'OK',
   'SET a ring_len 255 breaker');
cli(value('conn', conn(reset_epoch => 50, until => $MAX, mark_at => $NOW,
                       failures => 7, last_status => 429,
                       last_reason => 1)),
    'SET', 't26:conn:a1');
cli(value('lockout', lockout(failures => 3, mark_at => $MAX - 5,
                             until => $MAX - 5, last_status => 429,
                             reason => 1, scope => 2)),
    'SET', 't26:lockout:alpha:a1:exact:m');
cli(value('rejected', lockout(failures => 1, until => $NOW + 60_000,
                              last_failure_at => $NOW + 5 * 86400_000)),
    'SET', 't26:rejected:a1:m');
cli(value('pin', pin(set_at => $NOW, until => $NOW + 600_000, hash => 1,
                     conn => 'a2')),
    'SET', 't26:pin:alpha/m|00ff');
cli(value('settings', override(1 => 0)), 'SET',
    't26:settings:provider:alpha');
cli(value('settings', override(0 => 5) . 'xx'), 'SET',
    't26:settings:provider:gamma');
cli(value('breaker', 'x' x 8), 'SET', 't26:breaker:gamma');
cli(value('conn', conn(until => $NOW + 60_000), $MAX), 'SET',
    't26:conn:a1b');

ok(wait_for(sub { (stats($na)->{rejected} // 0) >= 2 + 9
                  && (stats($nb)->{rejected} // 0) >= 2 + 9 }, 5),
   'both nodes reject the messages and, at the next full load, the keys ('
   . (stats($na)->{rejected} // 0) . ' / ' . (stats($nb)->{rejected} // 0)
   . ')');

ok(wait_for(sub { (stats($na)->{syncs} // 0) >= 3 }, 5),
   'more full loads go by');

cmp_ok(metric($na, 'omniroute_redis_records_rejected_total') // 0, '>=', 11,
       '/metrics: omniroute_redis_records_rejected_total moves');
is(stats($na)->{errors}, 0, 'decodable records are rejected, not errors');

# serving and the admin API go on; the state is unchanged

my $r = chat($na);
is($r->{status}, 200, 'A still serves alpha');
is($r->{headers}{'x-omniroute-connection'}, 'a1',
   'on a1: its forged cooldown and lockout were not applied');
is(chat($nb)->{status}, 200, 'so does B');
is(api($na, 'GET', '/api/monitoring/health')->{status}, 200,
   'the admin API answers');

for my $n ($na, $nb) {
    my $name = $n == $na ? 'A' : 'B';
    my $cb = rec($n, 'table=breaker&key=beta');

    is_deeply([@$cb{qw(state epoch failures open_until)}],
              [@{$before{$n}{beta}}{qw(state epoch failures open_until)}],
              "$name: breaker beta unchanged");
    is(rec($n, 'table=conn&key=a2')->{until}, $before{$n}{a2}{until},
       "$name: cooldown of a2 unchanged");
    is(rec($n, 'table=breaker&key=alpha')->{found} ? 'found' : 'none',
       'none', "$name: no breaker alpha from the hostile records");
    ok(!rec($n, 'table=conn&key=a1')->{found}, "$name: no state for a1");
    ok(!rec($n, 'table=lockout&key=alpha:a1:exact:m')->{found},
       "$name: no lockout");
    ok(!rec($n, 'table=rejected&key=a1:m')->{found},
       "$name: no request_rejected record");
    ok(!rec($n, 'table=pin&key=alpha/m|00ff')->{found}, "$name: no pin");
    ok(!rec($n, 'table=breaker&key=gamma')->{found},
       "$name: no wrong-sized record");
    is(api($n, 'GET', '/api/resilience')->{json}{providers}{alpha}{breaker}
       {open_threshold}, $before{$n}{threshold},
       "$name: the settings are unchanged");
}

# the log: rate-limited, names table and key, never a value

my $log = $na->error_log;
my @lines = grep { /rejected an invalid record/ } split /\n/, $log;
my $elapsed = time - $t_first;

my $first = 'rejected an invalid record from Redis: table "breaker", '
            . 'key "alpha" (bad ring_len); ignored';
like($lines[0] // '', qr/\[warn\].*\Q$first\E/,
     'the first rejection is logged as a warning with table, key and field');
cmp_ok(scalar(@lines), '<=', int($elapsed / 2) + 1,
       'at most one line per log_interval (' . scalar(@lines) . ' lines for '
       . stats($na)->{rejected} . sprintf(' rejections in %.1f s)', $elapsed));
unlike($log, qr/\Q$SECRET\E/, 'no value bytes in the log');

# once the keys are gone and an interval has passed: the next rejection
# is logged again, with the count of those suppressed; odd keys escaped

$redis->cmd('DEL', $_) for grep { !/:(beta|a2|epoch|delta)$/ }
                               $redis->keys('t26:*');
my $n0 = stats($na)->{rejected};
sleep(2.5);
is(stats($na)->{rejected}, $n0, 'no more rejections once the keys are gone');

cli(message('breaker', "x\"y\n\x01z", $evil_breaker), 'PUBLISH',
    't26:events:0');
my $odd = 'key "x\\x22y\\x0a\\x01z" (bad ring_len); ignored (';
ok(wait_for(sub { $na->error_log
                  =~ /\Q$odd\E\d+ more such messages suppressed\)/ }),
   'a key with quotes and control bytes is logged escaped, with the count '
   . 'of suppressed lines');

$nb->done;
$na->done;
$redis->stop;

done_testing;
