#!/usr/bin/perl

# Issue 25, finding 3: a 400 saying the model does not support something
# the request uses (Anthropic's prefill, OpenAI's unsupported parameter,
# Gemini's "not enabled for models/...", OpenRouter's 404 "No endpoints
# found that support tool use") is classified capability: it falls over
# to the combo's next target by default, without an operator rule, and
# is never a failure of the connection (no cooldown, no breaker).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP;
use OmniTest;

my $t = OmniTest->new;
my $m = $t->mock('p');

my $TOKEN = 'capability-0123456789-abcdef';
$ENV{OMNI_TEST_API_TOKEN} = $TOKEN;

my %bodies = (
    prefill => '{"type":"error","error":{"type":"invalid_request_error",'
               . '"message":"This model does not support assistant message '
               . 'prefill. The conversation must end with a user message."}}',
    param   => '{"error":{"message":"Unsupported parameter: \'temperature\' '
               . 'is not supported with this model.","type":"invalid_request_'
               . 'error","param":"temperature","code":"unsupported_parameter"}}',
    gemini  => '{"error":{"code":400,"message":"Function calling is not '
               . 'enabled for models/gemma-3-27b-it","status":"INVALID_ARGUMENT"}}',
    orouter => '{"error":{"message":"No endpoints found that support tool '
               . 'use.","code":404}}',
);

sub uri {
    my ($s) = @_;
    $s =~ s/([^A-Za-z0-9_.~-])/sprintf('%%%02X', ord $1)/ge;
    return $s;
}

my %keys = (
    prefill => 'status=400,body=' . uri($bodies{prefill}),
    param   => 'status=400,body=' . uri($bodies{param}),
    gemini  => 'status=400,body=' . uri($bodies{gemini}),
    orouter => 'status=404,body=' . uri($bodies{orouter}),
    ok      => 'ok',
);

my $providers = $t->providers_per_key('p', \%keys);

my $combos = join "\n", map { "    omniroute_combo $_ $_/m ok/m;" }
             qw(prefill param gemini orouter);

$t->config(<<"EOF");
    omniroute_zone zone=omniroute:1m;

$providers

$combos

    omniroute_api_token env=OMNI_TEST_API_TOKEN;

    server {
        listen 127.0.0.1:%%PORT_gw%%;

        location /v1/ {
            omniroute_pass;
            omniroute_attempt_trail on;
        }

        location /_omniroute {
            internal;
            include %%PARAMS%%;
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

for my $k (qw(prefill param gemini orouter)) {
    my $path = $k eq 'prefill' ? '/v1/messages' : '/v1/chat/completions';
    my $r = $t->post($gw, $path, { model => $k, max_tokens => 16,
        messages => [{ role => 'user', content => 'hi' },
                     { role => 'assistant', content => 'Sure,' }] });

    is($r->{status}, 200, "$k: falls over by default");
    is($r->{headers}{'x-omniroute-connection'}, 'ok', "$k: to the next target");
    like($r->{headers}{'x-omniroute-trail'} // '', qr/^\Q$k\E;40[04];\d+ms, ok;200/,
         "$k: the trail shows both attempts")
        or diag($r->{headers}{'x-omniroute-trail'});

    my $c = $t->connection_state($gw, $k, $TOKEN) // {};
    ok(!$c->{retry_after_ms}, "$k: the connection does not cool down")
        or diag(explain $c);
    ok(!$c->{failures}, "$k: no failure of the connection");
}

my $mt = $t->get($gw, '/metrics', Authorization => "Bearer $TOKEN");
like($mt->{body}, qr/^omniroute_fallbacks_total\{reason="capability"\} 4$/m,
     'metrics: four capability fallbacks');

$t->done;
done_testing;
