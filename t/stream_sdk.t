#!/usr/bin/perl

# Issue 11 through the real SDKs (t/sdk: openai and @anthropic-ai/sdk from
# npm, installed by `make sdk-deps` into build/npm): an error after the
# metadata falls over and the SDK gets the next stream; keep-alive
# comments while held do not disturb it; a stream cut after content makes
# the SDK raise instead of reporting a truncated answer as complete; an
# in-band error after keep-alives raises too.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP;
use OmniTest;

my $npm = $ENV{OMNI_NPM_DIR} || "$OmniTest::ROOT/build/npm";

OmniTest::need(system('node --version >/dev/null 2>&1') == 0,
               'node is not installed (make test-deps)');

OmniTest::need(-d "$npm/node_modules/openai"
               && -d "$npm/node_modules/\@anthropic-ai/sdk",
               "the SDKs are not installed in $npm (make sdk-deps)");

my $t = OmniTest->new;
my $m = $t->mock('p');

my %keys = (
    'oc-err' => 'fixture=openai-chat-error-after-role,stall=2',
    'oc-ok'  => 'fixture=openai-chat,split=1',
    'oc-cut' => 'fixture=openai-chat,rst=3',
    'oc-hb'  => 'heartbeats,beat=200',
    'an-err' => 'fixture=anthropic-error-after-start,stall=4',
    'an-ok'  => 'fixture=anthropic-messages',
    'an-cut' => 'fixture=anthropic-messages,rst=9',
    'rs-err' => 'fixture=openai-responses-failed-after-created,stall=3',
    'rs-ok'  => 'fixture=openai-responses',
    'rs-cut' => 'fixture=openai-responses,half=8',
    'busy'   => 'status=503',
);

my $providers = $t->providers_per_key('p', \%keys,
    params => { 'oc-hb' => 'stream_first_content=1s' });

$t->config(<<"EOF");
    omniroute_zone zone=omniroute:1m;

$providers

    omniroute_combo chat-fall oc-err/m oc-ok/m;
    omniroute_combo chat-cut oc-cut/m oc-ok/m;
    omniroute_combo chat-hb oc-hb/m oc-ok/m;
    omniroute_combo chat-fail oc-hb/m busy/m;
    omniroute_combo an-fall an-err/m an-ok/m;
    omniroute_combo an-cut an-cut/m an-ok/m;
    omniroute_combo rs-fall rs-err/m rs-ok/m;
    omniroute_combo rs-cut rs-cut/m rs-ok/m;

    server {
        listen 127.0.0.1:%%PORT_gw%%;

        omniroute_stream_keepalive 300ms;
        omniroute_stream_keepalive_interval 200ms;

        location /v1/ {
            omniroute_pass;
        }

        location /_omniroute {
            internal;
            include %%PARAMS%%;
            proxy_read_timeout 10s;
        }
    }
EOF

$t->run($t->port('gw'));
my $base = 'http://127.0.0.1:' . $t->port('gw') . '/v1';

sub sdk {
    my ($kind, $model) = @_;
    local $ENV{OMNI_NPM_DIR} = $npm;
    my $out = `node $FindBin::Bin/sdk/stream.cjs $kind $base $model 2>&1`;
    my $r = eval { decode_json((split /\n/, $out)[-1]) };
    diag("sdk output: $out") if !$r || $ENV{OMNI_SDK_DEBUG};
    return $r || { ok => 0, error => { message => $out } };
}

my $r;

# OpenAI Chat Completions

$r = sdk('openai-chat', 'chat-fall');
ok($r->{ok}, 'openai SDK: an error after the role chunk fell over')
    or diag(explain $r);
is($r->{text}, 'Hello there', 'openai SDK: the next stream\'s text');

$r = sdk('openai-chat', 'chat-hb');
ok($r->{ok}, 'openai SDK: keep-alive comments, then the next target')
    or diag(explain $r);
is($r->{text}, 'Hello there', 'openai SDK: its text');

$r = sdk('openai-chat', 'chat-cut');
ok(!$r->{ok}, 'issue 11: openai SDK raises on a stream cut after content')
    or diag(explain $r);
like($r->{error}{message}, qr/stream was cut.*incomplete/,
     'with the gateway\'s message');

$r = sdk('openai-chat', 'chat-fail');
ok(!$r->{ok}, 'openai SDK raises when every attempt failed after '
   . 'keep-alives') or diag(explain $r);
like($r->{error}{message}, qr/mock p error 503|server_error|every attempt/,
     'with the last failure');

# Anthropic Messages

$r = sdk('anthropic', 'an-fall');
ok($r->{ok}, 'anthropic SDK: an overloaded_error after message_start fell '
   . 'over') or diag(explain $r);
is($r->{text}, 'Let me look at the files.', 'anthropic SDK: the text');

$r = sdk('anthropic', 'an-cut');
ok(!$r->{ok}, 'issue 11: anthropic SDK raises on a stream cut after '
   . 'content') or diag(explain $r);
like($r->{error}{message}, qr/stream was cut|api_error/,
     'with the gateway\'s error event');

# OpenAI Responses

$r = sdk('openai-responses', 'rs-fall');
ok($r->{ok}, 'openai SDK (Responses): response.failed after created fell '
   . 'over') or diag(explain $r);
is($r->{text}, 'Hi there', 'openai SDK (Responses): the text');

$r = sdk('openai-responses', 'rs-cut');
ok(!$r->{ok}, 'issue 11: openai SDK (Responses) raises on a stream cut in '
   . 'the middle of an event') or diag(explain $r);

$t->done;
done_testing;
