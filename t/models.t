#!/usr/bin/perl

# GET <omniroute_pass location>/models: the OpenAI model list of exactly
# the configured names (aliases, combos, then the provider/model targets),
# GET .../models/ID, HEAD; "omniroute_models off" (405 with Allow) and
# "omniroute_models pass=PROVIDER" (the provider's own list, through its
# connections with fallback); 405 with Allow for other methods; nginx -t
# on an unknown provider; the OpenAI npm SDK's models.list() when the SDK
# is installed.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP;
use OmniTest;

my $t = OmniTest->new;
my $m = $t->mock('p');

$t->write_file('key-o1', "sk-o1\n");
$t->write_file('key-b0', "sk-b0~status=503\n");
$t->write_file('key-b1', "sk-b1\n");

my $conf = <<'EOF';
    omniroute_zone zone=omniroute:1m;

    omniroute_provider openai url=http://127.0.0.1:%%PORT_mock_p%%/openai;
    omniroute_provider beta url=http://127.0.0.1:%%PORT_mock_p%%/beta;

    omniroute_connection o1 provider=openai key_file=%%TESTDIR%%/key-o1;
    omniroute_connection b0 provider=beta key_file=%%TESTDIR%%/key-b0
                         priority=0;
    omniroute_connection b1 provider=beta key_file=%%TESTDIR%%/key-b1
                         priority=1;

    omniroute_model gpt-4o openai/gpt-4o-2024-08-06;
    omniroute_combo smart openai/gpt-4o beta/m2 gpt-4o;
    omniroute_combo cheap strategy=round-robin beta/m2 beta/m3;

    server {
        listen 127.0.0.1:%%PORT_gw%%;

        location /v1/ {
            omniroute_pass;
        }

        location /off/ {
            omniroute_pass;
            omniroute_models off;
        }

        location /up/ {
            omniroute_pass;
            omniroute_models %%PASS%%;
        }

        location /_omniroute {
            internal;
            include %%PARAMS%%;
        }
    }
EOF

# nginx -t: an unknown provider, at the directive's line
(my $bad = $conf) =~ s/%%PASS%%/pass=nope/;
$t->config($bad);
my ($rc, $out) = $t->test_config;
isnt($rc, 0, 'nginx -t fails on pass= an unknown provider');
my @lines = split /\n/, $t->read_file('nginx.conf');
my ($n) = grep { $lines[$_] =~ /omniroute_models pass=nope/ } 0 .. $#lines;
like($out, qr/invalid value "pass=nope" of "omniroute_models": no provider "nope" is declared in \S+nginx\.conf:@{[$n + 1]}$/m,
     'naming the directive, the value and the reason at its line');

(my $bad2 = $conf) =~ s/%%PASS%%/always/;
$t->config($bad2);
($rc, $out) = $t->test_config;
like($out, qr/invalid value "always" of "omniroute_models": expected on, off or pass=PROVIDER/,
     'an unknown value');

(my $good = $conf) =~ s/%%PASS%%/pass=beta/;
$t->config($good);
$t->run($t->port('gw'));
my $gw = $t->port('gw');

my $r = $t->get($gw, '/v1/models');
is($r->{status}, 200, 'GET /v1/models: 200');
like($r->{headers}{'content-type'}, qr{^application/json}, 'JSON');
my $doc = eval { decode_json($r->{body}) } // {};
is($doc->{object}, 'list', 'an OpenAI list');
is_deeply([map { $_->{id} } @{$doc->{data} // []}],
          ['gpt-4o', 'smart', 'cheap', 'openai/gpt-4o-2024-08-06',
           'openai/gpt-4o', 'beta/m2', 'beta/m3'],
          'exactly the configured names: aliases and combos, then targets');
my @bad = grep { ($_->{object} // '') ne 'model'
                 || ($_->{owned_by} // '') ne 'omniroute'
                 || ($_->{created} // 0) !~ /^\d{10}$/ } @{$doc->{data}};
is(scalar @bad, 0, 'each entry: object model, created, owned_by omniroute');
is(scalar @{$m->requests}, 0, 'no provider was asked');

$r = $t->get($gw, '/v1/models/smart');
is($r->{status}, 200, 'GET /v1/models/smart');
is(eval { decode_json($r->{body})->{id} }, 'smart', 'one model');

$r = $t->get($gw, '/v1/models/openai/gpt-4o');
is(eval { decode_json($r->{body})->{id} }, 'openai/gpt-4o',
   'an id with a slash');

$r = $t->get($gw, '/v1/models/openai%2Fgpt-4o');
is(eval { decode_json($r->{body})->{id} }, 'openai/gpt-4o',
   'or with an escaped slash');

$r = $t->get($gw, '/v1/models/nope');
is($r->{status}, 404, 'an unknown id: 404');
is(eval { decode_json($r->{body})->{error}{code} }, 'model_not_found',
   'model_not_found');

$r = $t->http($gw, "HEAD /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
is($r->{status}, 200, 'HEAD /v1/models');
is($r->{body}, '', 'without a body');

$r = $t->http($gw, "DELETE /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
is($r->{status}, 405, 'DELETE /v1/models: 405');
is($r->{headers}{allow}, 'GET, HEAD, POST', 'Allow: GET, HEAD, POST');
is(eval { decode_json($r->{body})->{error}{code} }, 'method_not_allowed',
   'a JSON error');

$r = $t->get($gw, '/v1/chat/completions');
is($r->{status}, 405, 'GET /v1/chat/completions: 405');
is($r->{headers}{allow}, 'POST', 'Allow: POST');
is(eval { decode_json($r->{body})->{error}{code} }, 'method_not_allowed',
   'as JSON');

$r = $t->get($gw, '/off/models');
is($r->{status}, 405, 'omniroute_models off: 405');
is($r->{headers}{allow}, 'POST', 'Allow: POST');

# pass=beta: the provider's own list, through its connections
$m->clear;
$r = $t->get($gw, '/up/models?limit=5');
is($r->{status}, 200, 'pass=beta: the provider answered');
is($r->{headers}{'x-omniroute-connection'}, 'b1',
   'b1, after b0 failed');
my @seen = @{$m->requests};
is(scalar @seen, 2, 'two attempts');
is_deeply([map { "$_->{method} $_->{path}" } @seen],
          ['GET /beta/models?limit=5', 'GET /beta/models?limit=5'],
          'GET <provider url>/models with the query');
is($seen[1]{headers}{authorization}, 'Bearer sk-b1',
   'with the connection\'s key');
ok(!exists $seen[1]{headers}{'content-length'}, 'and no body');

SKIP: {
    # the SDK "make sdk-deps" installs (t/sdk)
    local $ENV{NODE_PATH} = ($ENV{OMNI_NPM_DIR} || "$OmniTest::ROOT/build/npm")
                            . '/node_modules';
    my $sdk = `node -e 'require("openai"); console.log("yes")' 2>/dev/null`;
    OmniTest::skip_without('the openai npm package is not installed '
                           . '(make sdk-deps)', 2)
        unless $sdk =~ /yes/;

    my $js = $t->write_file('sdk.js', <<"JS");
const OpenAI = require("openai");
const c = new OpenAI({ apiKey: "x", baseURL: "http://127.0.0.1:$gw/v1" });
(async () => {
  const ids = [];
  for await (const m of c.models.list()) ids.push(m.id);
  console.log(JSON.stringify(ids));
})().catch((e) => { console.log("error " + e); });
JS
    my $ids = `node $js 2>&1`;
    like($ids, qr/^\[/, 'the OpenAI SDK lists the models') or diag($ids);
    is_deeply(eval { decode_json($ids) }, [map { $_->{id} } @{$doc->{data}}],
              'the same names');
}

$t->done;

done_testing;
