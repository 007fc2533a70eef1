#!/usr/bin/perl

# Each worker keeps a copy of the connection records it read, valid while
# the connection table has not changed (ngx_omniroute_store_read_cached):
# a change made in the other worker is seen at once.  2 workers; c1
# (priority 0) answers 429 with Retry-After: 3600, c2 answers.  Over and
# over: while c1 cools, requests go to c2 alone; an operator clears c1's
# cooldown through the admin API (in whichever worker takes it), and the
# next request (in whichever worker takes it) tries c1 first again.  A
# short Retry-After of c3 lapses on the clock alone, with nothing written.
# c5 cools for an hour throughout, so that the table is never empty (an
# empty table is read without the copies).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP;
use Time::HiRes qw(sleep);
use OmniTest;

my $t = OmniTest->new(workers => 2);
my $m = $t->mock('p');

my $TOKEN = 'cache-0123456789-abcdef';
$ENV{OMNI_TEST_API_TOKEN} = $TOKEN;

$t->write_file('key-c1', "sk-c1~status=429,retry=3600\n");
$t->write_file('key-c2', "sk-c2\n");
$t->write_file('key-c3', "sk-c3~status=429,retry=2\n");
$t->write_file('key-c4', "sk-c4\n");
$t->write_file('key-c5', "sk-c5~status=429,retry=3600\n");

$t->config(<<'EOF');
    omniroute_zone zone=omniroute:1m;

    omniroute_provider alpha url=http://127.0.0.1:%%PORT_mock_p%%/alpha
                       kind=apikey;
    omniroute_provider beta url=http://127.0.0.1:%%PORT_mock_p%%/beta
                       kind=apikey;
    omniroute_connection c1 provider=alpha key_file=%%TESTDIR%%/key-c1
                         priority=0;
    omniroute_connection c2 provider=alpha key_file=%%TESTDIR%%/key-c2
                         priority=1;
    omniroute_connection c3 provider=beta key_file=%%TESTDIR%%/key-c3
                         priority=0;
    omniroute_connection c4 provider=beta key_file=%%TESTDIR%%/key-c4
                         priority=1;

    omniroute_provider gamma url=http://127.0.0.1:%%PORT_mock_p%%/gamma
                       kind=apikey;
    omniroute_connection c5 provider=gamma key_file=%%TESTDIR%%/key-c5;

    omniroute_model smart alpha/m1;
    omniroute_model quick beta/m2;
    omniroute_model other gamma/m3;

    omniroute_api_token env=OMNI_TEST_API_TOKEN;

    server {
        listen 127.0.0.1:%%PORT_gw%%;

        location /v1/ {
            omniroute_pass;
        }

        location /_omniroute {
            internal;
            include %%PARAMS%%;
        }

        location /api/ {
            omniroute_api;
        }
    }
EOF

$t->run($t->port('gw'));

my $gw = $t->port('gw');

# a coding agent's body (fixtures/agent_body.py), else a short one
my $body = OmniTest::agent_body(20, 'MODEL')
    // '{"model":"MODEL","messages":[{"role":"user","content":"hi"}]}';

sub chat {
    my ($model) = @_;
    (my $b = $body) =~ s/"MODEL"/"$model"/;
    return $t->post($gw, '/v1/chat/completions', $b);
}

sub tried { return $m->tried }

sub clear_c1 {
    my $r = $t->api_post($gw, '/api/resilience/cooldowns',
                         { connectionIds => ['c1'] }, $TOKEN);
    return "$r->{status} " . ($r->{json}{connections}{c1} // '-');
}

$m->clear;
my $r = chat('other');
is($r->{status}, 429, 'c5 answered 429: it cools for an hour');
is(tried(), 'c5', 'the one attempt');

$r = chat('smart');
is($r->{status}, 200, 'the first request: answered');
is(tried(), 'c1 c2', 'c1 answered 429, c2 the request');

my ($cooling, $retried, $cleared) = (1, 1, 1);

for my $round (1 .. 12) {
    # c1 cools: both workers pass over it (each reads its record once,
    # then its own copy)
    for (1 .. 4) {
        $r = chat('smart');
        my $seen = tried();
        if ($r->{status} != 200 || $seen ne 'c2') {
            $cooling = 0;
            diag("round $round: $r->{status}, tried $seen");
        }
    }

    my $c = clear_c1();
    if ($c ne '200 cleared') {
        $cleared = 0;
        diag("round $round: clearing c1: $c");
    }

    # the next request, in either worker, sees the cleared record
    $r = chat('smart');
    my $seen = tried();
    if ($r->{status} != 200 || $seen ne 'c1 c2') {
        $retried = 0;
        diag("round $round: after the clear $r->{status}, tried $seen");
    }
}

ok($cooling, 'while c1 cools, every request goes to c2 alone (12 rounds of 4)');
ok($cleared, 'the admin API cleared c1 every round');
ok($retried, 'after each clear the next request tried c1 first, whichever '
   . 'worker took the clear and the request');

# a cooldown that lapses: nothing changes in the zone, the clock does
$m->clear;
$r = chat('quick');
is(tried(), 'c3 c4', 'c3 answered 429 (Retry-After: 2), c4 the request');

my $passed = 1;
for (1 .. 6) {
    $r = chat('quick');
    my $seen = tried();
    $passed = 0 unless $r->{status} == 200 && $seen eq 'c4';
}
ok($passed, 'while c3 cools, requests go to c4 alone');

sleep(3.2);

my %after;
for (1 .. 4) {
    $r = chat('quick');
    $after{tried()}++;
}
ok($after{'c3 c4'}, 'once its Retry-After lapsed, c3 is tried again')
    or diag(explain(\%after));

$t->check_error_log;
$t->done;
done_testing;
