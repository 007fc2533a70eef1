#!/usr/bin/perl

# Issue 25, finding 4: a malformed event (a cut JSON chunk) before any
# content falls over like an error event, and is recorded a failure (502
# server_error); after content it ends the client's stream with an
# in-band error event (no [DONE]), the provider's connection is closed
# and the attempt is recorded a failure; the openai SDK raises.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP;
use OmniTest;

my $t = OmniTest->new;
my $m = $t->mock('p');

my $TOKEN = 'malformed-0123456789-abcdef';
$ENV{OMNI_TEST_API_TOKEN} = $TOKEN;

my %keys = (
    'mfirst' => 'fixture=openai-chat-malformed-first',
    'mafter' => 'fixture=openai-chat-malformed-after-content,stall=3',
    'ok'     => 'fixture=openai-chat',
);

my $providers = $t->providers_per_key('p', \%keys);

$t->config(<<"EOF");
    omniroute_zone zone=omniroute:1m;

$providers

    omniroute_combo mfirst mfirst/m ok/m;
    omniroute_combo mafter mafter/m ok/m;

    omniroute_api_token env=OMNI_TEST_API_TOKEN;

    server {
        listen 127.0.0.1:%%PORT_gw%%;

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

# before content: falls over

my $r = $t->post_stream($gw, '/v1/chat/completions',
                        { model => 'mfirst', stream => JSON::PP::true });
is($r->{status}, 200, 'a malformed first chunk: the client gets a stream');
is($r->{headers}{'x-omniroute-connection'}, 'ok', '... of the next target');
is($r->{body}, OmniTest::stream_fixture('openai-chat'),
   '... byte for byte, nothing of the malformed one');
my $c = $t->connection_state($gw, 'mfirst', $TOKEN);
is($c->{last_error_type}, 'server_error', 'recorded a failure ...')
    or diag(explain $c);
is($c->{last_status}, 502, '... like a 502');

# after content: an in-band error ends the stream

$m->clear;
$r = $t->post_stream($gw, '/v1/chat/completions',
                     { model => 'mafter', stream => JSON::PP::true });
is($r->{headers}{'x-omniroute-connection'}, 'mafter',
   'a malformed chunk after content: the committed attempt');
my $upto = OmniTest::stream_fixture('openai-chat-malformed-after-content', 3);
like($r->{body}, qr/^\Q$upto\E/, '... its events up to the malformed one');
like($r->{body}, qr/data: \{"error":\{[^\n]*"code":"stream_malformed"[^\n]*\}\n\n\z/,
     '... then an in-band error event ends it');
unlike($r->{body}, qr/\[DONE\]| there/, '... nothing after it, no [DONE]');
cmp_ok($r->{total_time}, '<', 2.5,
       '... at once (the provider kept the connection open)');
is($m->tried, 'mafter', 'not sent elsewhere (content went out)');
$c = $t->connection_state($gw, 'mafter', $TOKEN);
is($c->{last_error_type}, 'server_error', 'recorded a failure')
    or diag(explain $c);

# the openai SDK raises on it

my $npm = $ENV{OMNI_NPM_DIR} || "$OmniTest::ROOT/build/npm";

SKIP: {
    skip 'node or the SDK is not installed (make sdk-deps)', 1
        unless system('node --version >/dev/null 2>&1') == 0
               && -d "$npm/node_modules/openai";

    local $ENV{OMNI_NPM_DIR} = $npm;
    my $out = `node $FindBin::Bin/sdk/stream.cjs openai-chat `
              . "http://127.0.0.1:$gw/v1 mafter 2>&1";
    my $s = eval { decode_json((split /\n/, $out)[-1]) } || {};
    ok(!$s->{ok}, 'openai SDK raises, no truncated answer taken as whole')
        or diag($out);
}

$t->done;
done_testing;
