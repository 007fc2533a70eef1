#!/usr/bin/perl

# Issue 25 (D): a Gemini native request names its model in the URL path
# only (".../models/{model}:generateContent", no "model" in the body, as
# Google's API and SDKs send it): it is routed by the path's model (a
# combo falls over, each attempt's path carries its target's model) and
# its body reaches each provider byte for byte, without a "model" added.
# A body without "model" on another path is still 400 missing_model.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use JSON::PP;
use Test::More;
use OmniTest;

my $t = OmniTest->new;
my $ma = $t->mock('a');
my $mb = $t->mock('b');

$t->write_file('key-a', "sk-a~status=503\n");
$t->write_file('key-b', "sk-b\n");

$t->config(<<'EOF2');
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

        location /v1/ {
            omniroute_pass;
        }

        location /_omniroute {
            internal;
            include %%PARAMS%%;
        }
    }
EOF2

$t->run($t->port('gw'));
my $gw = $t->port('gw');

my $body = '{"contents":[{"role":"user","parts":[{"text":"hi"}]}],'
         . '"generationConfig":{"temperature":0.2}}';

my $r = $t->post($gw, '/v1beta/models/gemini-x:generateContent', $body);

is($r->{status}, 200, 'issue 25: routed by the path\'s model (no 400)')
    or diag("$r->{status} $r->{body}");
is($r->{headers}{'x-omniroute-connection'}, 'cb',
   'the combo fell over to its second target');

my @a = @{$ma->requests};
my @b = @{$mb->requests};

is(scalar @a, 1, 'the first target was tried');
like($a[0]{path} // '', qr{^/v1beta/models/up-a:generateContent$},
     'its path carries its target\'s model');
is(scalar @b, 1, 'then the second');
like($b[0]{path} // '', qr{^/v1beta/models/up-b:generateContent$},
     'its path carries its own');
is($b[0]{body}, $body, 'the body byte for byte: no "model" added');

# a path model that is no model name: 400 invalid_model
$r = $t->post($gw, '/v1beta/models/a%01b:generateContent', $body);
is($r->{status}, 400, 'a path model with a control byte: 400');
is(OmniTest::json($r)->{error}{code}, 'invalid_model', '... invalid_model');

# a model in neither: 400 missing_model as before
$r = $t->post($gw, '/v1/chat/completions',
              '{"messages":[{"role":"user","content":"hi"}]}');
is($r->{status}, 400, 'an OpenAI body without "model": 400');
is(OmniTest::json($r)->{error}{code}, 'missing_model', '... missing_model');

# an unknown path model: as an unknown body model would be
$r = $t->post($gw, '/v1beta/models/nope:generateContent', $body);
is($r->{status}, 404, 'an unknown path model: 404 like a body model');

$t->done;
done_testing;
