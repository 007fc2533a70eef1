#!/usr/bin/perl

# Issue 25, finding 5: no wait of a streaming client is silent.  During a
# combo wait, a queue wait, a pacing wait and a slow provider header the
# client gets the 200 event-stream header and ": keep-alive" comments
# after omniroute_stream_keepalive (here 1s, every 500ms); the answer
# follows them, and a failure after them is an in-band error event in the
# client's format (also the gateway's own answers: SEMAPHORE_TIMEOUT).  A
# stream of heartbeats only is a stall, never a 200 of pings: committed,
# it ends with an in-band stream_stall error past
# omniroute_stream_probe_timeout and is recorded; one that ends without
# any content or end event is an in-band stream_truncated error.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP;
use IO::Select;
use Time::HiRes qw(sleep time);
use OmniTest;

my $t = OmniTest->new;
my $p = $t->mock('p');      # behaviour by key
my $c = $t->mock('c');      # combo wait (set_behavior)
my $q = $t->mock('q');      # queue wait
my $z = $t->mock('z');      # pacing wait

my $TOKEN = 'waits-0123456789-abcdefgh';
$ENV{OMNI_TEST_API_TOKEN} = $TOKEN;

my %keys = (
    'f1'      => 'status=429,retry=2',
    'f2'      => 'status=429,retry=2',
    'slow'    => 'delay=3000,fixture=openai-chat',
    'slowerr' => 'delay=2500,status=500',
    'slowe2'  => 'delay=1500,status=500',
    'hb'      => 'heartbeats,beat=200',
    'pings'   => 'fixture=openai-chat,beats=5,beat=100,cut=0,chunked=0',
);

for my $k (qw(c1 c2 q z)) {
    $t->write_file("key-$k", "sk-$k\n");
}

my $providers = $t->providers_per_key('p', \%keys);

$t->config(<<"EOF2");
    omniroute_zone zone=omniroute:1m;

$providers

    omniroute_provider c1 url=http://127.0.0.1:%%PORT_mock_c%%/c1;
    omniroute_provider c2 url=http://127.0.0.1:%%PORT_mock_c%%/c2;
    omniroute_connection c1 provider=c1 key_file=%%TESTDIR%%/key-c1;
    omniroute_connection c2 provider=c2 key_file=%%TESTDIR%%/key-c2;

    omniroute_provider q url=http://127.0.0.1:%%PORT_mock_q%%/q;
    omniroute_connection q provider=q key_file=%%TESTDIR%%/key-q
                         max_concurrent=1;

    omniroute_provider z url=http://127.0.0.1:%%PORT_mock_z%%/z;
    omniroute_connection z provider=z key_file=%%TESTDIR%%/key-z
                         pacing=on;

    omniroute_combo cw c1/m c2/m;
    omniroute_combo cwf f1/m f2/m;

    omniroute_api_token env=OMNI_TEST_API_TOKEN;

    server {
        listen 127.0.0.1:%%PORT_gw%%;

        omniroute_stream_keepalive 1s;
        omniroute_stream_keepalive_interval 500ms;

        location /v1/ {
            omniroute_pass;
        }

        location /hb/ {
            omniroute_pass;
            omniroute_stream_probe_timeout 1500ms;
        }

        location /_omniroute {
            internal;
            include %%PARAMS%%;
            proxy_read_timeout 10s;
        }

        location /api/ {
            omniroute_api;
        }
    }
EOF2

$t->run($t->port('gw'));
my $gw = $t->port('gw');

# a keep-alive is due at 1s; what a busy machine may add to it
my $SLACK = 0.8;

# the chunks of a response as they arrive (times from $t0)
sub read_stream {
    my ($s, $t0) = @_;
    my (@chunks, $buf);
    $buf = '';
    my $sel = IO::Select->new($s);
    my $deadline = $t0 + 20;

    while (time < $deadline) {
        last unless $sel->can_read($deadline - time);
        my $data = '';
        my $n = sysread($s, $data, 65536);
        last unless $n;
        push @chunks, [time - $t0, $data];
        $buf .= $data;
    }

    close $s;
    my $res = OmniTest::parse_response($buf);
    $res->{chunks} = \@chunks;
    $res->{total_time} = time - $t0;
    return $res;
}

sub first_byte {
    my ($r) = @_;
    return @{$r->{chunks}} ? $r->{chunks}[0][0] : 99;
}

sub wait_requests {
    my ($mock, $n) = @_;
    for (1 .. 500) {
        return 1 if @{$mock->requests} >= $n;
        sleep(0.01);
    }
    return 0;
}

sub api {
    my ($method, $path, $body) = @_;
    my %h = (Authorization => "Bearer $TOKEN");
    if (defined $body) {
        $body = encode_json($body);
        $h{'Content-Type'} = 'application/json';
    }
    my $r = $t->http($gw, OmniTest::request_text($method, $path, $body, %h));
    $r->{json} = eval { decode_json($r->{body}) };
    return $r;
}

sub strip_keepalives {
    my ($body) = @_;
    my $n = 0;
    $n++ while $body =~ s/\A: keep-alive\n\n//;
    return ($n, $body);
}

my $stream = { stream => JSON::PP::true,
               messages => [{ role => 'user', content => 'hi' }] };

# 1. a combo wait (3 s): both targets answer 429 Retry-After: 3, the
#    combo waits for them; keep-alives meanwhile, then the answer

$c->set_behavior('status=429,retry=3');

my $t0 = time;
my $s = $t->start_post($gw, '/v1/chat/completions',
                       { %$stream, model => 'cw' });
ok(wait_requests($c, 2), 'combo wait: both targets answered 429');
$c->set_behavior('fixture=openai-chat');

my $r = read_stream($s, $t0);

is($r->{status}, 200, 'combo wait: a 200 event stream');
is($r->{headers}{'content-type'}, 'text/event-stream', '... of events');
cmp_ok(first_byte($r), '<', 1 + $SLACK,
       'issue 25: the first bytes came after the 1s threshold, not after '
       . 'the 3s wait') or diag(explain $r->{chunks});
cmp_ok($r->{total_time}, '>', 2.5, 'the combo did wait for the cooldown');
my ($n, $rest) = strip_keepalives($r->{body});
cmp_ok($n, '>=', 3, 'keep-alives every 500ms during the wait') or diag($n);
is($rest, OmniTest::stream_fixture('openai-chat'),
   'then the waited-for target\'s stream byte for byte');
is(scalar @{$c->requests}, 3, 'two 429s, then the attempt after the wait');

# 2. a combo wait that ends without an answer: the last failure in-band

$t0 = time;
$r = $t->post_stream($gw, '/v1/chat/completions',
                     { %$stream, model => 'cwf' });
is($r->{status}, 200, 'a failing combo wait: the 200 went out');
cmp_ok(first_byte($r), '<', 1 + $SLACK,
       'issue 25: keep-alives from the threshold on');
($n, $rest) = strip_keepalives($r->{body});
cmp_ok($n, '>=', 2, 'keep-alives while it waited');
like($rest, qr/\Adata:[ ]\{"error":\{.*"code":"rate_limit_exceeded",
                "status":429,"retry_after":\d+\}\}\n\n\z/x,
     'issue 25: the last 429 as an in-band Chat error, no [DONE]')
    or diag($rest);

# the same for an Anthropic client: event: error
$r = $t->post_stream($gw, '/v1/messages',
                     { %$stream, model => 'cwf', max_tokens => 16 });
($n, $rest) = strip_keepalives($r->{body});
like($rest, qr/\Aevent:[ ]error\ndata:[ ]\{"type":"error","error":\{"type":
                "rate_limit_error",.*"status":429/x,
     'issue 25: an Anthropic client gets event: error') or diag($rest);

# 3. a queue wait: the connection's one slot is taken for 2.5s

$q->set_behavior('delay=2500,fixture=openai-chat');
my $busy = $t->start_post($gw, '/v1/chat/completions',
                          { %$stream, model => 'q/m' });
ok(wait_requests($q, 1), 'queue: the slot is taken');
$q->set_behavior('fixture=openai-chat');

$r = $t->post_stream($gw, '/v1/chat/completions', { %$stream, model => 'q/m' });
is($r->{status}, 200, 'queue wait: a 200 event stream');
cmp_ok(first_byte($r), '<', 1 + $SLACK,
       'issue 25: the first bytes during the queue wait')
    or diag(explain $r->{chunks});
($n, $rest) = strip_keepalives($r->{body});
cmp_ok($n, '>=', 2, 'keep-alives while queued');
is($rest, OmniTest::stream_fixture('openai-chat'),
   'then the stream, once the slot freed');
is(OmniTest::finish($busy, 10)->{status}, 200, 'the first one was served');

# 4. a queue wait that times out: the gateway's own 503 SEMAPHORE_TIMEOUT,
#    in-band (no attempt was made), with its Retry-After

$r = api('PATCH', '/api/resilience',
         { global => { request_queue => { max_wait_ms => 2500 } } });
is($r->{status}, 200, 'the queue wait budget is now 2.5s');

$q->clear;
$q->set_behavior('delay=4500,fixture=openai-chat');
$busy = $t->start_post($gw, '/v1/chat/completions',
                       { %$stream, model => 'q/m' });
ok(wait_requests($q, 1), 'queue: the slot is taken for 4.5s');

$r = $t->post_stream($gw, '/v1/responses',
                     { stream => JSON::PP::true, input => 'hi',
                       model => 'q/m' });
is($r->{status}, 200, 'queue timeout after keep-alives: the 200 went out');
cmp_ok(first_byte($r), '<', 1 + $SLACK, 'keep-alives from the threshold');
($n, $rest) = strip_keepalives($r->{body});
like($rest, qr/\Aevent:[ ]error\ndata:[ ]\{"type":"error","code":
                "SEMAPHORE_TIMEOUT",.*"status":503,"retry_after":1[,}]/x,
     'issue 25: SEMAPHORE_TIMEOUT as an in-band Responses error event, with '
     . 'its retry hint') or diag($r->{body});
unlike($r->{body}, qr/response\.completed/, 'and nothing else');
is(scalar @{$q->requests}, 1, 'the timed-out request reached no provider');
OmniTest::finish($busy, 10);

api('PATCH', '/api/resilience',
    { global => { request_queue => { max_wait_ms => 30000 } } });

# 5. a pacing wait: the provider says "try again in 3s"; the request
#    waits the pause out on the same connection

$z->set_behavior('status=429,body=%7B%22error%22%3A%7B%22message%22%3A%22'
                 . 'Rate%20limit%20reached.%20Please%20try%20again%20in%20'
                 . '3s.%22%2C%22type%22%3A%22requests%22%7D%7D');
$t0 = time;
$s = $t->start_post($gw, '/v1/chat/completions', { %$stream, model => 'z/m' });
ok(wait_requests($z, 1), 'pacing: the provider asked for a 3s pause');
$z->set_behavior('fixture=openai-chat');

$r = read_stream($s, $t0);
is($r->{status}, 200, 'pacing wait: a 200 event stream');
cmp_ok(first_byte($r), '<', 1 + $SLACK,
       'issue 25: the first bytes during the pause')
    or diag(explain $r->{chunks});
cmp_ok($r->{total_time}, '>', 2.5, 'the pause was waited out');
($n, $rest) = strip_keepalives($r->{body});
cmp_ok($n, '>=', 3, 'keep-alives during the pause');
is($rest, OmniTest::stream_fixture('openai-chat'),
   'then the stream after the pause');
is(scalar @{$z->requests}, 2, 'the same connection, twice');

# 6. a slow provider header (3s): keep-alives, then its stream

$r = $t->post_stream($gw, '/v1/chat/completions',
                     { %$stream, model => 'slow/m' });
is($r->{status}, 200, 'a slow header: a 200 event stream');
cmp_ok(first_byte($r), '<', 1 + $SLACK,
       'issue 25: the first bytes before the provider\'s header')
    or diag(explain $r->{chunks});
($n, $rest) = strip_keepalives($r->{body});
cmp_ok($n, '>=', 3, 'keep-alives while the provider is silent');
is($rest, OmniTest::stream_fixture('openai-chat'), 'then its stream');

# ... and a slow error: in-band

$r = $t->post_stream($gw, '/v1/chat/completions',
                     { %$stream, model => 'slowerr/m' });
cmp_ok(first_byte($r), '<', 1 + $SLACK, 'a slow error: keep-alives first');
($n, $rest) = strip_keepalives($r->{body});
like($rest, qr/\Adata:[ ]\{"error":\{.*"status":500/,
     'issue 25: the provider\'s 500 as an in-band error event')
    or diag($rest);

# without streaming the client waits for the answer itself
$r = $t->post($gw, '/v1/chat/completions',
              { model => 'slowe2/m',
                messages => [{ role => 'user', content => 'hi' }] });
is($r->{status}, 500, 'not a stream: the HTTP error, no keep-alives')
    or diag("$r->{status} $r->{body}");

# 7. heartbeats only, committed (the only target): past
#    omniroute_stream_probe_timeout (1.5s) a stall, in-band and recorded

$r = $t->post_stream($gw, '/hb/chat/completions',
                     { %$stream, model => 'hb/m' });
is($r->{status}, 200, 'heartbeats only: the stream was committed');
like($r->{body}, qr/\A(:[ ]ping\n\n)+data:[ ]\{"error":\{.*"code":"stream_stall",
                    "status":504/sx,
     'issue 25: it ends with an in-band stream_stall error, not a 200 of '
     . 'pings') or diag($r->{body});
unlike($r->{body}, qr/\[DONE\]/, 'no [DONE]');
cmp_ok($r->{total_time}, '<', 6, 'at the deadline, not at the provider\'s end');
is($t->connection_state($gw, 'hb', $TOKEN)->{last_error_type}, 'stream_stall',
   'issue 25: recorded a failure (stream_stall)');

# 8. heartbeats, then the end: no content and no end event is no answer

$r = $t->post_stream($gw, '/v1/chat/completions',
                     { %$stream, model => 'pings/m' });
like($r->{body}, qr/\A(:[ ]ping\n\n)+data:[ ]\{"error":\{.*"code":
                    "stream_truncated"/sx,
     'issue 25: a stream of pings that ends is an in-band error')
    or diag($r->{body});
isnt($t->connection_state($gw, 'pings', $TOKEN)->{last_error_type} // '', '',
     'and recorded a failure');

$t->done;
done_testing;
