#!/usr/bin/perl

# R-STREAM-1 (issue 10, SSE at proxy_pass speed): after the commit point a
# stream's buffers go to the client as they are, read in place.  A 3 MiB
# Chat Completions stream of real chunk shapes (role-only chunk first,
# content deltas of 30 B to 40 KiB, comments, a usage-only chunk) served
# by nginx itself (so that events are cut at every read boundary), read by
# a client that takes it slowly (the gateway's writes block and the
# upstream's buffer stays busy): the client gets every byte as the
# provider sent it, in order, on a single connection and after a
# fallover, and with proxy_buffering on in the attempt location (the
# stream spills to a temp file); the usage chunk is still counted (2
# workers).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use IO::Select;
use IO::Socket::INET;
use JSON::PP;
use Time::HiRes qw(sleep time);
use OmniTest;

my $t = OmniTest->new(workers => 2);

my $TOKEN = 'pass-0123456789-abcdef';
$ENV{OMNI_TEST_API_TOKEN} = $TOKEN;

# the stream: Chat Completions chunks as OpenAI sends them
my $json = JSON::PP->new->canonical;
my $id = 'chatcmpl-Bpass';
my $chunk = sub {
    my ($delta, $finish) = @_;
    return 'data: ' . $json->encode({
        id => $id, object => 'chat.completion.chunk', created => 1764570000,
        model => 'gpt-4o-2024-08-06', system_fingerprint => 'fp_50cad350e4',
        choices => [{ index => 0, delta => $delta, logprobs => undef,
                      finish_reason => $finish }] }) . "\n\n";
};

my $sse = $chunk->({ role => 'assistant', content => '', refusal => undef },
                   undef);
my @sizes = (30, 200, 4100, 90, 40_000, 7, 12_000, 300, 1500);
my $i = 0;
while (length $sse < 3 * 1024 * 1024) {
    my $n = $sizes[$i++ % @sizes];
    my $text = substr(("word \x{e9}t\x{e9} \"q\" \\ line\n" x (1 + $n / 20)), 0, $n);
    $sse .= $chunk->({ content => $text }, undef);
    $sse .= ": keep-alive\n\n" if $i % 97 == 0;
}
$sse .= $chunk->({}, 'stop');
$sse .= 'data: ' . $json->encode({
    id => $id, object => 'chat.completion.chunk', created => 1764570000,
    model => 'gpt-4o-2024-08-06', choices => [],
    usage => { prompt_tokens => 123456, completion_tokens => 654321,
               total_tokens => 777777 } }) . "\n\n";
$sse .= "data: [DONE]\n\n";

utf8::encode($sse);
$t->write_file('stream.sse', $sse);

$t->config(<<'EOF');
    omniroute_zone zone=omniroute:1m;

    omniroute_provider up url=http://127.0.0.1:%%PORT_up%%/ok;
    omniroute_provider bad url=http://127.0.0.1:%%PORT_up%%/bad;
    omniroute_connection up-1 provider=up key_file=%%TESTDIR%%/key;
    omniroute_connection bad-1 provider=bad key_file=%%TESTDIR%%/key
                         priority=0;
    omniroute_connection up-2 provider=up key_file=%%TESTDIR%%/key
                         priority=1;
    omniroute_model one up/gpt-4o;
    omniroute_combo two bad/gpt-4o up/gpt-4o;

    server {
        listen 127.0.0.1:%%PORT_gw%%;

        location /v1/ {
            omniroute_pass;
        }

        location /_omniroute {
            internal;
            include %%PARAMS%%;
            proxy_buffer_size 4k;
        }

        # an operator who buffers (the stream spills to a temp file)
        location /buffered/v1/ {
            omniroute_pass /_buffered;
        }

        location /_buffered {
            internal;
            include %%TESTDIR%%/params-buffered;
            proxy_buffer_size 4k;
            proxy_buffers 4 4k;
            proxy_busy_buffers_size 8k;
            proxy_max_temp_file_size 1m;
            proxy_temp_file_write_size 8k;
        }

        location = /metrics {
            omniroute_api;
            omniroute_api_token env=OMNI_TEST_API_TOKEN;
        }
    }

    # the provider: the stream as a file (nginx cuts it where it likes)
    server {
        listen 127.0.0.1:%%PORT_up%%;

        location /ok/ {
            # a POST to a file is 405: served as a GET of it instead
            error_page 405 =200 /stream.sse;
            return 405;
        }

        location = /stream.sse {
            root %%TESTDIR%%;
            default_type text/event-stream;
        }

        location /bad/ {
            return 500 '{"error":{"message":"upstream failed","type":"server_error"}}';
        }
    }
EOF

$t->write_file('key', "sk-pass\n");
$t->params_with('params-buffered', proxy_buffering => 'on');
$t->run($t->port('gw'));

my $gw = $t->port('gw');

# a client that reads 16 KiB at a time, 5 ms apart
sub slow_post {
    my ($model, $prefix) = @_;
    $prefix //= '';
    my $body = '{"model":"' . $model . '","stream":true,'
               . '"messages":[{"role":"user","content":"go"}]}';
    my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1:$gw", Timeout => 5)
        or die "connect: $!";
    setsockopt($s, Socket::SOL_SOCKET(), Socket::SO_RCVBUF(), 16384);
    $s->autoflush(1);
    print $s OmniTest::request_text('POST', "$prefix/v1/chat/completions",
                                    $body,
                                    'Content-Type' => 'application/json');
    my $buf = '';
    my $sel = IO::Select->new($s);
    my $deadline = time + 60;
    while (time < $deadline && $sel->can_read($deadline - time)) {
        my $n = sysread($s, $buf, 16384, length $buf);
        last unless $n;
        sleep(0.005);
    }
    close $s;
    return OmniTest::parse_response($buf);
}

for my $case (['one', 'one connection'], ['two', 'after a fallover'],
              ['one', 'proxy_buffering on', '/buffered'])
{
    my ($model, $name, $prefix) = @$case;
    my $r = slow_post($model, $prefix);

    is($r->{status}, 200, "$name: 200");
    like($r->{headers}{'content-type'} // '', qr{text/event-stream},
         "$name: an event stream");
    is(length $r->{body}, length $sse, "$name: every byte");
    ok($r->{body} eq $sse, "$name: the provider's bytes, in order");
}

# a stream's tokens are counted in its log phase, after its last byte is
# sent: wait (with a deadline) for the second one's
my $re = qr/^omniroute_tokens_total\{[^}]*model="one"[^}]*type="prompt"\} (\d+)$/m;
my $text = $t->get_until($gw, '/metrics', sub {
    $_[0] =~ $re && $1 >= 2 * 123456
}, Authorization => "Bearer $TOKEN")->{body};
my ($prompt) = $text =~ $re;
is($prompt, 2 * 123456,
   'the usage chunk at the end was read in place (two streams of "one")');

$t->done;
done_testing;
