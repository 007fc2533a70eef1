#!/usr/bin/perl

# Issue 25, finding 5, through the real SDKs (t/sdk, `make sdk-deps`):
# what a client does with the answers that used to be silent or untrue.
# A stream of heartbeats only (the only target) made the SDKs return an
# empty answer without an error; now it is a stall and they raise.  The
# same for a queue timeout after keep-alives (the gateway's own 503 goes
# in-band) and for a slow provider header: keep-alives, then its stream,
# which the SDKs read as usual.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP;
use Time::HiRes qw(sleep);
use OmniTest;

my $npm = $ENV{OMNI_NPM_DIR} || "$OmniTest::ROOT/build/npm";

OmniTest::need(system('node --version >/dev/null 2>&1') == 0,
               'node is not installed (make test-deps)');

OmniTest::need(-d "$npm/node_modules/openai"
               && -d "$npm/node_modules/\@anthropic-ai/sdk",
               "the SDKs are not installed in $npm (make sdk-deps)");

my $t = OmniTest->new;
my $m = $t->mock('p');
my $q = $t->mock('q');

my $TOKEN = 'waitsdk-0123456789-abcdefg';
$ENV{OMNI_TEST_API_TOKEN} = $TOKEN;

my %keys = (
    'oc-hb'   => 'heartbeats,beat=200',
    'an-hb'   => 'heartbeats,beat=200',
    'oc-slow' => 'delay=2000,fixture=openai-chat',
    'an-slow' => 'delay=2000,fixture=anthropic-messages',
);

my $providers = $t->providers_per_key('p', \%keys);
$t->write_file('key-q', "sk-q\n");

$t->config(<<"EOF");
    omniroute_zone zone=omniroute:1m;

$providers

    omniroute_provider q url=http://127.0.0.1:%%PORT_mock_q%%/q;
    omniroute_connection q provider=q key_file=%%TESTDIR%%/key-q
                         max_concurrent=1;

    omniroute_api_token env=OMNI_TEST_API_TOKEN;

    server {
        listen 127.0.0.1:%%PORT_gw%%;

        omniroute_stream_keepalive 500ms;
        omniroute_stream_keepalive_interval 300ms;
        omniroute_stream_probe_timeout 1500ms;

        location /v1/ {
            omniroute_pass;
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
EOF

$t->run($t->port('gw'));
my $gw = $t->port('gw');
my $base = "http://127.0.0.1:$gw/v1";

sub sdk {
    my ($kind, $model) = @_;
    local $ENV{OMNI_NPM_DIR} = $npm;
    my $out = `node $FindBin::Bin/sdk/stream.cjs $kind $base $model 2>&1`;
    my $r = eval { decode_json((split /\n/, $out)[-1]) };
    diag("sdk output: $out") if !$r || $ENV{OMNI_SDK_DEBUG};
    return $r || { ok => 0, error => { message => $out } };
}

my $r;

# heartbeats only: a stall, the SDKs raise instead of an empty answer

$r = sdk('openai-chat', 'oc-hb/m');
ok(!$r->{ok}, 'issue 25: openai SDK raises on a stream of heartbeats only')
    or diag(explain $r);
like($r->{error}{message} // '', qr/stalled/, 'with the stall');

$r = sdk('anthropic', 'an-hb/m');
ok(!$r->{ok}, 'issue 25: anthropic SDK raises on it too') or diag(explain $r);
like($r->{error}{message} // '', qr/stalled|stream_stall/, 'with the stall');

# a slow provider header: keep-alives, then the stream, read as usual

$r = sdk('openai-chat', 'oc-slow/m');
ok($r->{ok}, 'openai SDK: keep-alives during a slow header, then the '
   . 'stream') or diag(explain $r);
is($r->{text}, 'Hello there', 'openai SDK: its text');

$r = sdk('anthropic', 'an-slow/m');
ok($r->{ok}, 'anthropic SDK: the same') or diag(explain $r);
is($r->{text}, 'Let me look at the files.', 'anthropic SDK: its text');

# a queue timeout after keep-alives: the gateway's own 503, in-band

my $rr = $t->http($gw, OmniTest::request_text('PATCH', '/api/resilience',
    encode_json({ global => { request_queue => { max_wait_ms => 1500 } } }),
    Authorization => "Bearer $TOKEN", 'Content-Type' => 'application/json'));
is($rr->{status}, 200, 'queue wait budget 1.5s');

$q->set_behavior('delay=4000,fixture=openai-chat');
my $busy = $t->start_post($gw, '/v1/chat/completions',
                          { model => 'q/m', stream => JSON::PP::true,
                            messages => [{ role => 'user',
                                           content => 'hi' }] });
for (1 .. 500) {
    last if @{$q->requests};
    sleep(0.01);
}

$r = sdk('openai-chat', 'q/m');
ok(!$r->{ok}, 'issue 25: openai SDK raises on a queue timeout after '
   . 'keep-alives') or diag(explain $r);
like($r->{error}{message} // '', qr/concurrency slot/,
     'with the gateway\'s SEMAPHORE_TIMEOUT message');
OmniTest::finish($busy, 10);

$t->done;
done_testing;
