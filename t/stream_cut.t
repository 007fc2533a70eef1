#!/usr/bin/perl

# R-STREAM-2..4 (issue 11): after the commit point a truncation is
# visible.  A stream cut by the provider (reset, premature close, read
# timeout, an end without the format's terminal event) or stopped by the
# watch (stall budget, throughput watchdog) ends the client's stream with
# an in-band error event in the client's format and no [DONE]; an event
# cut in the middle never reaches the client in part; the attempt is
# recorded as the connection's failure (transport, timeout, stream_stall
# without a cooldown unless stream_stall_cooldown); a cut response that
# is not a stream closes the client connection at once instead of
# hanging.  Never replayed.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP;
use Time::HiRes qw(time);
use OmniTest;

my $t = OmniTest->new;
my $m = $t->mock('p');

my $TOKEN = 'streams-0123456789-abcdef';
$ENV{OMNI_TEST_API_TOKEN} = $TOKEN;

my %keys = (
    'c-rst'   => 'fixture=openai-chat,rst=3',
    'c-err'   => 'fixture=openai-chat-error-after-content,stall=3',
    'c-fin'   => 'fixture=openai-chat,cut=3,chunked=0',
    'c-chk'   => 'fixture=openai-chat,cut=3',
    'c-half'  => 'fixture=openai-chat,half=3',
    'c-nodone' => 'fixture=openai-chat,cut=7,chunked=0',
    'a-rst'   => 'fixture=anthropic-messages,rst=9',
    'r-rst'   => 'fixture=openai-responses,rst=8',
    'c-stall' => 'fixture=openai-chat,stall=3',
    'c-stcd'  => 'fixture=openai-chat,stall=3',
    'c-slow'  => 'sse=15,gap=250',
    'c-rto'   => 'fixture=openai-chat,stall=3',
    'j-cut'   => 'ok,cutbody=20',
    'j-rst'   => 'ok,cutbody=20,rst=1',
    'j-chk'   => 'ok,cutbody=20,chunked=1',
    'spare'   => 'fixture=openai-chat',
);

$t->key_files(\%keys);

my %extra = (
    'c-stall' => 'stream_watchdog=on stream_stall=1s',
    'c-stcd'  => 'stream_watchdog=on stream_stall=1s',
    'c-slow'  => 'stream_watchdog=on stream_warmup=0 stream_window=1s '
                 . 'stream_min_rate=100 stream_min_bytes=10',
);

my $providers = join "\n", map {
    "    omniroute_provider $_ url=http://127.0.0.1:%%PORT_mock_p%%/$_ "
    . ($extra{$_} // '') . ";\n"
    . "    omniroute_connection $_ provider=$_ key_file=%%TESTDIR%%/key-$_;\n"
    . "    omniroute_combo x-$_ $_/m spare/m;"
} sort keys %keys;

$t->config(<<"EOF");
    omniroute_zone zone=omniroute:1m;

$providers

    omniroute_api_token env=OMNI_TEST_API_TOKEN;

    server {
        listen 127.0.0.1:%%PORT_gw%%;

        location /v1/ {
            omniroute_pass;
        }

        location /short/ {
            omniroute_pass /_short;
        }

        location /_omniroute {
            internal;
            include %%PARAMS%%;
            proxy_read_timeout 10s;
        }

        location /_short {
            internal;
            include %%PARAMS%%;
            proxy_read_timeout 1s;
        }

        location /api/ {
            omniroute_api;
        }
    }
EOF

$t->run($t->port('gw'));
my $gw = $t->port('gw');

sub api {
    my ($method, $path, $body) = @_;
    my $r = $t->http($gw, OmniTest::request_text($method, $path,
        defined $body ? encode_json($body) : undef,
        Authorization => "Bearer $TOKEN",
        defined $body ? ('Content-Type' => 'application/json') : ()));
    return OmniTest::json($r);
}

sub stream {
    my ($id, $path) = @_;
    return $t->post_stream($gw, $path // '/v1/chat/completions',
                           { model => "x-$id", stream => JSON::PP::true });
}

my $chat_error = qr/data: \{"error":\{"message":"the provider's stream (?:[^"\\]|\\.)*; the answer is incomplete","type":"server_error","code":"stream_truncated","status":502\}\}\n\n\z/;

# a reset after content

my $r = stream('c-rst');
is($r->{status}, 200, 'a reset after content: the stream was committed');
is($r->{headers}{'x-omniroute-connection'}, 'c-rst',
   'never replayed on the spare connection');
is(substr($r->{body}, 0, length OmniTest::stream_fixture('openai-chat', 3)),
   OmniTest::stream_fixture('openai-chat', 3),
   'the events before the cut, whole');
like($r->{body}, $chat_error,
     'issue 11: then an in-band error event (stream_truncated)');
unlike($r->{body}, qr/\[DONE\]/, 'and no [DONE]: an SDK raises');
is($t->connection_state($gw, 'c-rst', $TOKEN)->{last_error_type}, 'transport',
   'R-STREAM-4 recorded as the connection\'s transport failure');

# the provider's own error event after content: passed on, and the stream
# ends at once (the provider keeps its connection open)

$r = stream('c-err');
is($r->{body}, OmniTest::stream_fixture('openai-chat-error-after-content', 3),
   'issue 11: an error event after content goes to the client as it is');
cmp_ok($r->{total_time}, '<', 2.5,
       'issue 11: and ends the stream when it arrives (proxy_read_timeout '
       . '10s)');
is($t->connection_state($gw, 'c-err', $TOKEN)->{last_error_type},
   'server_error', 'recorded as the error it stands for');

# an end without [DONE]: a clean close, a chunked stream without its last
# chunk

for my $id ('c-fin', 'c-chk') {
    $r = stream($id);
    is(substr($r->{body}, 0,
              length OmniTest::stream_fixture('openai-chat', 3)),
       OmniTest::stream_fixture('openai-chat', 3),
       "$id: the events before the end");
    like($r->{body}, $chat_error, "$id: an end without [DONE] is a cut");
}

# a cut in the middle of an event: none of it reaches the client

$r = stream('c-half');
my $expect = OmniTest::stream_fixture('openai-chat', 3);
like($r->{body}, qr/\A\Q$expect\E(data: \{"error"[^\n]*\n\n)\z/,
     'issue 11: half an event is never passed on') or diag($r->{body});

# a finish_reason and usage, a clean end without [DONE]: complete

$r = stream('c-nodone');
is($r->{body}, OmniTest::stream_fixture('openai-chat', 7),
   'a Chat stream with its finish_reason ending without [DONE] is complete');
is($t->connection_state($gw, 'c-nodone', $TOKEN)->{status}, 'active',
   'and a success');

# Anthropic and Responses clients

$r = stream('a-rst', '/v1/messages');
is(substr($r->{body}, 0,
          length OmniTest::stream_fixture('anthropic-messages', 9)),
   OmniTest::stream_fixture('anthropic-messages', 9),
   'Anthropic: the events before the cut');
like($r->{body}, qr/event: error\ndata: \{"type":"error","error":\{"type":"api_error","message":"(?:[^"\\]|\\.)*"\},"status":502\}\n\n\z/,
     'issue 11: an Anthropic stream ends with event: error');
unlike($r->{body}, qr/message_stop/, 'no message_stop');

$r = stream('r-rst', '/v1/responses');
like($r->{body}, qr/event: error\ndata: \{"type":"error","code":"stream_truncated",[^\n]*\n\n\z/,
     'issue 11: a Responses stream ends with event: error');
unlike($r->{body}, qr/response\.completed/, 'no response.completed');

# the stall budget after the commit (R-STREAM-3): stream_stall, no
# cooldown (R-CD-8)

$r = stream('c-stall');
like($r->{body}, qr/"code":"stream_stall","status":504\}\}\n\n\z/,
     'R-STREAM-3 a stall after content ends the stream with stream_stall');
cmp_ok($r->{total_time}, '<', 4, 'after the budget (1s)');
my $c = $t->connection_state($gw, 'c-stall', $TOKEN);
is($c->{last_error_type}, 'stream_stall', 'R-CD-8 recorded as stream_stall');
is($c->{status}, 'active', 'R-CD-8 without a cooldown');

# ... with stream_stall_cooldown on, with a cooldown

my $p = api('PATCH', '/api/resilience', { providers => { 'c-stcd' => {
            cooldown => { stream_stall_cooldown => JSON::PP::true } } } });
ok($p, 'stream_stall_cooldown on at runtime') or diag(explain $p);
$r = stream('c-stcd');
is($t->connection_state($gw, 'c-stcd', $TOKEN)->{status}, 'cooldown',
   'R-CD-8 stream_stall_cooldown on: the stall cools the connection');

# the throughput watchdog (R-STREAM-2): output below the rate

$r = stream('c-slow');
like($r->{body}, qr/\Adata: .*part 1 .*"code":"stream_stall","status":504\}\}\n\n\z/s,
     'R-STREAM-2 a trickle below the minimum rate is cut by the watchdog');
unlike($r->{body}, qr/part 15/, 'before its end');
is($t->connection_state($gw, 'c-slow', $TOKEN)->{last_error_type},
   'stream_stall', 'recorded as stream_stall');

# proxy_read_timeout after the commit: timeout

$r = $t->post_stream($gw, '/short/chat/completions',
                     { model => 'x-c-rto', stream => JSON::PP::true });
like($r->{body}, qr/stream timed out.*"code":"stream_truncated","status":504/,
     'a read timeout after content ends with an error event');
is($t->connection_state($gw, 'c-rto', $TOKEN)->{last_error_type}, 'timeout',
   'recorded as a timeout');

# a cut response that is not a stream: the connection closes at once

for my $id ('j-cut', 'j-rst') {
    my $t0 = time;
    $r = $t->post($gw, '/v1/chat/completions', { model => "x-$id" });
    my $took = time - $t0;
    is($r->{status}, 200, "$id: the header was committed");
    ok(length($r->{body}) < $r->{headers}{'content-length'},
       "$id: fewer bytes than its Content-Length");
    cmp_ok($took, '<', 3,
           "issue 11: $id: the client connection closed, no hang");
}

# a chunked plain response without its last chunk: closed, not completed

{
    my $t0 = time;
    $r = $t->post($gw, '/v1/chat/completions', { model => 'x-j-chk' });
    is($r->{status}, 200, 'a chunked body cut: the header was committed');
    unlike($r->{raw}, qr/\r\n0\r\n\r\n\z/,
           'issue 11: no terminating chunk: the client sees the cut');
    cmp_ok(time - $t0, '<', 3, 'and the connection closed at once');
}

$t->done;
done_testing;
