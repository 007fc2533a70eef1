#!/usr/bin/perl

# Issue 25, finding 2: refusals and filters are answers.  A stream whose
# answer was filtered (Chat finish_reason "content_filter", Anthropic
# stop_reason "refusal"), with or without its terminal event, is passed
# on as it is, recorded a success, never a provider failure, and the
# prompt is never sent to another target (the combo's next one, nor the
# emergency target); a 400 content_filter error (Azure OpenAI's shape)
# is returned as it is and goes nowhere else either.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP;
use OmniTest;

my $t = OmniTest->new;
my $m = $t->mock('p');

my $TOKEN = 'refusal-0123456789-abcdef';
$ENV{OMNI_TEST_API_TOKEN} = $TOKEN;

my $azure = '{"error":{"message":"The response was filtered due to the '
          . 'prompt triggering Azure OpenAI\'s content management policy.",'
          . '"type":null,"param":"prompt","code":"content_filter",'
          . '"status":400,"innererror":{"code":"ResponsibleAIPolicyViolation",'
          . '"content_filter_result":{"hate":{"filtered":true,'
          . '"severity":"high"}}}}}';

my %keys = (
    # filtered: with [DONE], without it (cut after the filter chunk)
    'cfdone'  => 'fixture=openai-chat-content-filter',
    'cfcut'   => 'fixture=openai-chat-content-filter,cut=2',
    # refused: with message_stop, without it
    'anstop'  => 'fixture=anthropic-refusal',
    'ancut'   => 'fixture=anthropic-refusal,cut=2,chunked=0',
    # Azure's filter error
    'azure'   => 'status=400,body=' . uri($azure),
    # the healthy next target and the emergency one: never asked
    'ok'      => 'fixture=openai-chat',
    'emerg'   => 'fixture=openai-chat',
);

sub uri {
    my ($s) = @_;
    $s =~ s/([^A-Za-z0-9_.~-])/sprintf('%%%02X', ord $1)/ge;
    return $s;
}

my $providers = $t->providers_per_key('p', \%keys);

$t->config(<<"EOF");
    omniroute_zone zone=omniroute:1m;

$providers

    omniroute_combo cfdone cfdone/m ok/m;
    omniroute_combo cfcut cfcut/m ok/m;
    omniroute_combo anstop anstop/m ok/m;
    omniroute_combo ancut ancut/m ok/m;
    omniroute_combo azure azure/m ok/m;

    omniroute_emergency_fallback emerg/m;

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

for my $case (['cfdone', '/v1/chat/completions', 'openai-chat-content-filter',
               undef, 'Chat content_filter with [DONE]'],
              ['cfcut', '/v1/chat/completions', 'openai-chat-content-filter',
               2, 'Chat content_filter without [DONE]'],
              ['anstop', '/v1/messages', 'anthropic-refusal', undef,
               'Anthropic refusal with message_stop'],
              ['ancut', '/v1/messages', 'anthropic-refusal', 2,
               'Anthropic refusal without message_stop'])
{
    my ($model, $path, $fixture, $n, $what) = @$case;

    $m->clear;

    my $r = $t->post_stream($gw, $path,
                            { model => $model, stream => JSON::PP::true });

    is($r->{status}, 200, "$what: 200");
    is($r->{headers}{'x-omniroute-connection'}, $model,
       "$what: the filtering target answered");
    is($r->{headers}{'x-omniroute-attempts'}, '1', "$what: one attempt");
    is($r->{body}, OmniTest::stream_fixture($fixture, $n),
       "$what: its events as they are, no error event added");
    is($m->tried, $model, "$what: the prompt went nowhere else");

    my $c = $t->connection_state($gw, $model, $TOKEN);
    ok(!$c->{last_error_type} || $c->{last_error_type} eq 'none',
       "$what: not recorded a failure") or diag(explain $c);
    ok(!$c->{retry_after_ms}, "$what: no cooldown");
}

# Azure's content filter error: returned as it is, nowhere else

$m->clear;
my $r = $t->post($gw, '/v1/chat/completions', { model => 'azure' });
is($r->{status}, 400, 'a 400 content_filter error reaches the client');
like($r->{body}, qr/"code":"content_filter"/, '... its body as it is');
is($m->tried, 'azure', '... the prompt went nowhere else');
ok(!$t->connection_state($gw, 'azure', $TOKEN)->{retry_after_ms},
   '... no cooldown');

# through the real SDKs (make sdk-deps): a normal end with the reason

my $npm = $ENV{OMNI_NPM_DIR} || "$OmniTest::ROOT/build/npm";

SKIP: {
    skip 'node or the SDKs are not installed (make sdk-deps)', 8
        unless system('node --version >/dev/null 2>&1') == 0
               && -d "$npm/node_modules/openai"
               && -d "$npm/node_modules/\@anthropic-ai/sdk";

    my $base = "http://127.0.0.1:$gw/v1";

    for my $case (['openai-chat', 'cfcut', 'content_filter'],
                  ['openai-chat', 'cfdone', 'content_filter'],
                  ['anthropic', 'ancut', 'refusal'],
                  ['anthropic', 'anstop', 'refusal'])
    {
        my ($kind, $model, $finish) = @$case;

        local $ENV{OMNI_NPM_DIR} = $npm;
        my $out = `node $FindBin::Bin/sdk/stream.cjs $kind $base $model 2>&1`;
        my $s = eval { decode_json((split /\n/, $out)[-1]) }
                || { ok => 0, error => { message => $out } };

        ok($s->{ok}, "$kind SDK, $model: the stream ends without raising")
            or diag(explain $s);
        is($s->{finish}, $finish, "$kind SDK, $model: with $finish");
    }
}

$t->done;
done_testing;
