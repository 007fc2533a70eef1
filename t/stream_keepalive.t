#!/usr/bin/perl

# R-REQ-5, R-STREAM-2, R-STREAM-3 (issue 11): a client never waits in
# silence.  A stream held before its first content gets the 200 header
# and ": keep-alive" comments after omniroute_stream_keepalive; falling
# over stays possible (the next attempt's events follow without its
# headers); the per-provider first-content deadline and the stall budget
# (heartbeats do not count) stop a heartbeat-only attempt and fall over;
# when every attempt fails after the stream started the client gets an
# in-band error event in its own format, with the status and retry hint;
# omniroute_stream_probe_timeout bounds the hold (heartbeats only until
# then are a stall: it falls over, issue 25); the last candidate is never
# cut by the first-content deadline.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP;
use OmniTest;

my $t = OmniTest->new;
my $m = $t->mock('p');

my $TOKEN = 'streams-0123456789-abcdef';
$ENV{OMNI_TEST_API_TOKEN} = $TOKEN;

my %keys = (
    'hb-fc'   => 'heartbeats,beat=200',
    'hb-st'   => 'heartbeats,beat=200',
    'hb-last' => 'fixture=openai-chat,beats=8,beat=250',
    'slow-ok' => 'fixture=openai-chat,beats=8,beat=250',
    'oc-ok'   => 'fixture=openai-chat',
    'an-ok'   => 'fixture=anthropic-messages',
    'busy'    => 'status=429,retry=30',
    'busy-a'  => 'status=429,retry=30',
    'busy-r'  => 'status=429,retry=30',
    'busy-q'  => 'status=429,retry=30',
    'busy2'   => 'status=429,retry=30',
);

$t->key_files(\%keys);

$t->config(<<'EOF');
    omniroute_zone zone=omniroute:1m;

    # a first-content deadline of 1s; a stall budget of 1s
    omniroute_provider hb-fc url=http://127.0.0.1:%%PORT_mock_p%%/hb-fc
                       stream_first_content=1s;
    omniroute_provider hb-st url=http://127.0.0.1:%%PORT_mock_p%%/hb-st
                       stream_watchdog=on stream_stall=1s;
    omniroute_provider hb-last url=http://127.0.0.1:%%PORT_mock_p%%/hb-last
                       stream_first_content=500ms;
    omniroute_provider slow-ok url=http://127.0.0.1:%%PORT_mock_p%%/slow-ok;
    omniroute_provider oc-ok url=http://127.0.0.1:%%PORT_mock_p%%/oc-ok;
    omniroute_provider an-ok url=http://127.0.0.1:%%PORT_mock_p%%/an-ok;
    omniroute_provider busy url=http://127.0.0.1:%%PORT_mock_p%%/busy;
    omniroute_provider busy2 url=http://127.0.0.1:%%PORT_mock_p%%/busy2;
    omniroute_provider busy-a url=http://127.0.0.1:%%PORT_mock_p%%/busy-a;
    omniroute_provider busy-r url=http://127.0.0.1:%%PORT_mock_p%%/busy-r;
    omniroute_provider busy-q url=http://127.0.0.1:%%PORT_mock_p%%/busy-q;

    omniroute_connection hb-fc provider=hb-fc key_file=%%TESTDIR%%/key-hb-fc;
    omniroute_connection hb-st provider=hb-st key_file=%%TESTDIR%%/key-hb-st;
    omniroute_connection hb-last provider=hb-last
                         key_file=%%TESTDIR%%/key-hb-last;
    omniroute_connection slow-ok provider=slow-ok
                         key_file=%%TESTDIR%%/key-slow-ok;
    omniroute_connection oc-ok provider=oc-ok key_file=%%TESTDIR%%/key-oc-ok;
    omniroute_connection an-ok provider=an-ok key_file=%%TESTDIR%%/key-an-ok;
    omniroute_connection busy provider=busy key_file=%%TESTDIR%%/key-busy;
    omniroute_connection busy2 provider=busy2 key_file=%%TESTDIR%%/key-busy2;
    omniroute_connection busy-a provider=busy-a
                         key_file=%%TESTDIR%%/key-busy-a;
    omniroute_connection busy-r provider=busy-r
                         key_file=%%TESTDIR%%/key-busy-r;
    omniroute_connection busy-q provider=busy-q
                         key_file=%%TESTDIR%%/key-busy-q;

    omniroute_combo fc hb-fc/m oc-ok/m;
    omniroute_combo st hb-st/m an-ok/m;
    omniroute_combo fail hb-fc/m busy/m;
    omniroute_combo fail-a hb-fc/m busy-a/m;
    omniroute_combo fail-r hb-fc/m busy-r/m;
    omniroute_combo fail-q hb-fc/m busy-q/m;
    omniroute_combo last busy2/m hb-last/m;
    omniroute_combo bound slow-ok/m oc-ok/m;

    omniroute_api_token env=OMNI_TEST_API_TOKEN;

    server {
        listen 127.0.0.1:%%PORT_gw%%;

        omniroute_stream_keepalive 400ms;
        omniroute_stream_keepalive_interval 200ms;

        location /v1/ {
            omniroute_pass;
        }

        location /bound/ {
            omniroute_pass;
            omniroute_stream_probe_timeout 700ms;
        }

        location /quiet/ {
            omniroute_pass;
            omniroute_stream_keepalive off;
        }

        location /_omniroute {
            internal;
            include %%PARAMS%%;
            proxy_read_timeout 10s;
        }

        location /api/ {
            omniroute_api;
        }

        location = /metrics {
            omniroute_api;
        }
    }
EOF

$t->run($t->port('gw'));
my $gw = $t->port('gw');

sub first_byte {
    my ($r) = @_;
    my ($c) = grep { $_->[1] =~ /\r\n\r\n/ } @{$r->{chunks}};
    return $c ? $c->[0] : 99;
}

# a heartbeat-only upstream, first-content deadline: keep-alives, then
# the next target's stream

my $r = $t->post_stream($gw, '/v1/chat/completions',
                        { model => 'fc', stream => JSON::PP::true });

is($r->{status}, 200, 'issue 11: the client gets a stream');
cmp_ok(first_byte($r), '<', 0.9,
       'issue 11: its header came after the hold (400ms), not after the '
       . 'fallover') or diag(explain $r->{chunks});
is($r->{headers}{'content-type'}, 'text/event-stream', 'an event stream');
like($r->{body}, qr/\A(: keep-alive\n\n)+data: /,
     'keep-alives, then the next attempt\'s events');
cmp_ok(scalar(() = $r->{body} =~ /: keep-alive/g), '>=', 2,
       'a keep-alive every 200ms while held');
unlike($r->{body}, qr/: ping/, 'nothing of the heartbeat-only attempt');
my $rest = $r->{body};
$rest =~ s/\A(: keep-alive\n\n)+//;
is($rest, OmniTest::stream_fixture('openai-chat'),
   'then the next target\'s stream byte for byte');
ok(!exists $r->{headers}{'x-omniroute-connection'},
   'the early header names no connection (it was not known yet)');

my $c = $t->connection_state($gw, 'hb-fc', $TOKEN);
is($c->{last_error_type}, 'stream_stall',
   'R-CD-8 the deadline is recorded as stream_stall');
is($c->{status}, 'active', 'R-CD-8 and sets no cooldown');

# the stall budget: heartbeats do not count (R-STREAM-3)

$r = $t->post_stream($gw, '/v1/messages',
                     { model => 'st', stream => JSON::PP::true });
is($r->{status}, 200, 'R-STREAM-3 stall budget: a stream');
$rest = $r->{body};
$rest =~ s/\A(: keep-alive\n\n)+//;
is($rest, OmniTest::stream_fixture('anthropic-messages'),
   'R-STREAM-3 a heartbeat-only turn trips the stall budget; the next '
   . 'target\'s Anthropic stream follows');
cmp_ok($r->{total_time}, '>', 0.9, 'after about the budget (1s)');
is($t->connection_state($gw, 'hb-st', $TOKEN)->{last_error_type},
   'stream_stall', 'R-STREAM-3 recorded as stream_stall');

# every attempt fails after the stream started: an in-band error

$r = $t->post_stream($gw, '/v1/chat/completions',
                     { model => 'fail', stream => JSON::PP::true });
is($r->{status}, 200, 'all failed after keep-alives: the 200 is sent');
like($r->{body}, qr/^data:[ ]\{"error":\{.*"code":"rate_limit_exceeded",
                    "status":429,"retry_after":30\}\}\n\n\z/mx,
     'issue 11: an in-band Chat error event with status and retry hint')
    or diag($r->{body});
unlike($r->{body}, qr/\[DONE\]/, 'and no [DONE]');

$r = $t->post_stream($gw, '/v1/messages',
                     { model => 'fail-a', stream => JSON::PP::true });
like($r->{body}, qr/^event:[ ]error\ndata:[ ]\{"type":"error","error":\{"type":
                    "rate_limit_error",.*"status":429,"retry_after":30\}\n\n\z/mx,
     'issue 11: an Anthropic client gets event: error') or diag($r->{body});

$r = $t->post_stream($gw, '/v1/responses',
                     { model => 'fail-r', stream => JSON::PP::true });
like($r->{body}, qr/^event:[ ]error\ndata:[ ]\{"type":"error","code":
                    "rate_limit_exceeded",.*"status":429/mx,
     'issue 11: a Responses client gets event: error') or diag($r->{body});

# without keep-alives the client gets the error response itself

$r = $t->post_stream($gw, '/quiet/chat/completions',
                     { model => 'fail-q', stream => JSON::PP::true });
is($r->{status}, 429, 'omniroute_stream_keepalive off: the HTTP error');
is($r->{headers}{'retry-after'}, '30', 'with its Retry-After');

# the last candidate is never cut by the first-content deadline

$r = $t->post_stream($gw, '/v1/chat/completions',
                     { model => 'last', stream => JSON::PP::true });
is($r->{headers}{'x-omniroute-connection'}, 'hb-last',
   'R-STREAM-2 the last candidate is not cut: its slow start is kept');
like($r->{body}, qr/\A(: ping\n\n)+data: .*\[DONE\]\n\n\z/s,
     'its stream whole (it was never held: no keep-alives)');

# omniroute_stream_probe_timeout: held at most that long without content;
# heartbeats only until then is a stall (issue 25): the next target

$r = $t->post_stream($gw, '/bound/chat/completions',
                     { model => 'bound', stream => JSON::PP::true });
$rest = $r->{body};
$rest =~ s/\A(: keep-alive\n\n)+//;
is($rest, OmniTest::stream_fixture('openai-chat'),
   'issue 25: heartbeats past the hold bound are a stall: keep-alives, then '
   . 'the next target\'s stream') or diag($r->{body});
unlike($r->{body}, qr/: ping/, 'none of the stalled stream\'s heartbeats');
is($t->connection_state($gw, 'slow-ok', $TOKEN)->{last_error_type},
   'stream_stall', 'issue 25: recorded as stream_stall');

my $mt = $t->get($gw, '/metrics', Authorization => "Bearer $TOKEN");
like($mt->{body}, qr/^omniroute_fallbacks_total\{reason="stream_stall"\} [1-9]/m,
     'metrics: fallbacks for stream_stall');
like($mt->{body}, qr/^omniroute_attempts_total\{reason="stream_stall"\} [1-9]/m,
     'metrics: attempts ended by stream_stall');

$t->done;
done_testing;
