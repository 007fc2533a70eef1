#!/usr/bin/perl

# omniroute_breaker_transitions_total counts OPEN -> HALF_OPEN (issue 15):
# the change happens by time, on reading; the admission that takes the
# probe under the zone lock writes it first and counts it, once, however
# many requests on both workers see the breaker then.  A failed probe
# re-opens (OPEN counted again) and the next HALF_OPEN counts once more;
# a successful probe closes.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(sleep);
use OmniTest;
use PromText;

my $t = OmniTest->new(workers => 2);
my $flaky = $t->mock('flaky');
my $good = $t->mock('good');

my $TOKEN = 'half-open-0123456789-abcdef';
$ENV{OMNI_TEST_API_TOKEN} = $TOKEN;

$t->write_file('key-f', "sk-f\n");
$t->write_file('key-g', "sk-g\n");

$t->config(<<'EOF');
    omniroute_zone zone=omniroute:1m;

    omniroute_provider flaky url=http://127.0.0.1:%%PORT_mock_flaky%%/v1
                       kind=local breaker_reset=1s cooldown_base=1ms
                       cooldown_max=5ms;
    omniroute_provider good url=http://127.0.0.1:%%PORT_mock_good%%/v1;
    omniroute_connection f1 provider=flaky key_file=%%TESTDIR%%/key-f;
    omniroute_connection g1 provider=good key_file=%%TESTDIR%%/key-g;
    omniroute_combo chain flaky/m good/m;

    server {
        listen 127.0.0.1:%%PORT_gw%% reuseport;

        location /v1/ {
            omniroute_pass;
            omniroute_max_attempts 2;
        }

        location /_omniroute {
            internal;
            include %%PARAMS%%;
        }

        location = /metrics {
            omniroute_api;
            omniroute_api_token env=OMNI_TEST_API_TOKEN;
        }
    }
EOF

$t->run($t->port('gw'));
my $gw = $t->port('gw');

sub transitions {
    my ($name) = @_;
    my $text = $t->get($gw, '/metrics',
                       Authorization => "Bearer $TOKEN")->{body};
    my $s = PromText::check($t, $text, $name);
    return { map {
        $_ => $s->{"omniroute_breaker_transitions_total{provider=\"flaky\","
                   . "state=\"$_\"}"} // 0
    } qw(CLOSED DEGRADED OPEN HALF_OPEN) };
}

sub burst {
    my @socks = map { $t->start_post($gw, '/v1/chat/completions',
                                     '{"model":"chain"}') } 1 .. 8;
    return map { OmniTest::finish($_, 5) } @socks;
}

# the local profile: 1 failure DEGRADED, 2 OPEN
$flaky->set_behavior('status=503');
$t->post($gw, '/v1/chat/completions', { model => 'chain' }) for 1 .. 2;

my $c = transitions('open');
is($c->{DEGRADED}, 1, 'DEGRADED once');
is($c->{OPEN}, 1, 'OPEN once');
is($c->{HALF_OPEN}, 0, 'not HALF_OPEN yet');

# reading the breaker before the reset timeout changes nothing
$t->post($gw, '/v1/chat/completions', { model => 'chain' }) for 1 .. 3;
is(transitions('still open')->{HALF_OPEN}, 0, 'still OPEN: nothing counted');

# the reset timeout passes; the metrics gauge reads HALF_OPEN but counts
# nothing: only the admission writes the change
sleep(1.2);
$c = transitions('half open, unread');
is($c->{HALF_OPEN}, 0, 'a scrape does not count the change');

# eight concurrent requests over both workers: one probe (it fails, late
# enough that the others find it in flight)
$flaky->set_behavior('status=503,delay=600');
$flaky->clear;
my @res = burst();
is(scalar(grep { $_->{status} == 200 } @res), 8, 'burst 1: all answered');
is(scalar @{$flaky->requests}, 1, 'burst 1: one probe');

$c = transitions('probe failed');
is($c->{HALF_OPEN}, 1, 'OPEN -> HALF_OPEN counted once');
is($c->{OPEN}, 2, 'the failed probe re-opened it');

# the longer hold (2 x 1 s) passes; the probe succeeds this time
sleep(2.3);
$flaky->set_behavior('delay=600');
$flaky->clear;
@res = burst();
is(scalar(grep { $_->{status} == 200 } @res), 8, 'burst 2: all answered');
is(scalar @{$flaky->requests}, 1, 'burst 2: one probe');

$c = transitions('probe succeeded');
is($c->{HALF_OPEN}, 2, 'HALF_OPEN counted once more');
is($c->{CLOSED}, 1, 'closed by the probe');
is($c->{OPEN}, 2, 'no more OPEN');

like($t->error_log, qr/"flaky" OPEN -> HALF_OPEN/, 'the change is logged');

$t->done;
done_testing;
