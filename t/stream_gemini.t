#!/usr/bin/perl

# Gemini native paths (issue 25, finding 6): a streamGenerateContent
# request for a combo falls over from a failing first target to a second
# with another upstream model; each provider receives its target's model
# in the URL path (/models/up-b:streamGenerateContent?alt=sse) as in the
# body's "model", and the usageMetadata of the streamed chunks (Google's
# documented shape, t/fixtures/streams/gemini-stream.sse) is counted in
# omniroute_tokens_total (2 workers).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use JSON::PP;
use Test::More;
use Time::HiRes qw(time);
use OmniTest;

my $t = OmniTest->new(workers => 2);
my $ma = $t->mock('a');
my $mb = $t->mock('b');

my $TOKEN = 'gemini-0123456789-abcdef';
$ENV{OMNI_TEST_API_TOKEN} = $TOKEN;

$t->write_file('key-a', "sk-a~status=503\n");
$t->write_file('key-b', "sk-b~fixture=gemini-stream\n");

$t->config(<<'EOF', main => "env OMNI_TEST_API_TOKEN;");
    omniroute_zone zone=omniroute:1m;

    omniroute_provider pa url=http://127.0.0.1:%%PORT_mock_a%%/v1beta;
    omniroute_provider pb url=http://127.0.0.1:%%PORT_mock_b%%/v1beta;

    omniroute_connection ca provider=pa key_file=%%TESTDIR%%/key-a;
    omniroute_connection cb provider=pb key_file=%%TESTDIR%%/key-b;

    omniroute_combo gemini-x pa/up-a pb/up-b;

    server {
        listen 127.0.0.1:%%PORT_gw%%;

        location /v1beta/ {
            omniroute_pass;
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

my $r = $t->post($gw, '/v1beta/models/gemini-x:streamGenerateContent?alt=sse',
                 '{"model":"gemini-x","contents":[{"role":"user","parts":'
                 . '[{"text":"hi"}]}]}');

is($r->{status}, 200, 'the fallover answered');
like($r->{body}, qr/how can I help/, 'the second target\'s stream passed');

my @a = @{$ma->requests};
my @b = @{$mb->requests};

is(scalar @a, 1, 'the first target was tried');
like($a[0]{path} // '',
     qr{^/v1beta/models/up-a:streamGenerateContent\?alt=sse$},
     'the first attempt carries its target\'s model in the path');
is(scalar @b, 1, 'the second target was tried');
like($b[0]{path} // '',
     qr{^/v1beta/models/up-b:streamGenerateContent\?alt=sse$},
     'the fallover carries the second target\'s model in the path');
is(eval { decode_json($b[0]{body})->{model} } // '', 'up-b',
   'and in the body');

sub tokens {
    my ($type) = @_;
    my $text = $t->get($gw, '/metrics',
                       Authorization => "Bearer $TOKEN")->{body};
    return $text =~ /^omniroute_tokens_total\{provider="pb",connection="cb",
                     [^}]*type="$type"\}\s(\d+)$/mx ? $1 : undef;
}

# counted when the request is logged: wait for it, with a deadline
my $deadline = time + 10;
my $prompt;
while (!defined($prompt = tokens('prompt')) && time < $deadline) {
    select undef, undef, undef, 0.1;
}

is($prompt, 2095, 'promptTokenCount counted');
is(tokens('completion'), 89, 'candidatesTokenCount counted');
is(tokens('cached'), 1792, 'cachedContentTokenCount counted');
is(tokens('reasoning'), 60, 'thoughtsTokenCount counted');

$t->done;
done_testing;
