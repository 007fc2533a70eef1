#!/usr/bin/perl

# R-REQ-2: the client's gateway key, session and lease headers never reach
# a provider; the connection's credential is sent in the provider's style;
# other client headers pass; the provider's fixed headers win.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use OmniTest;

my $t = OmniTest->new;
my $m = $t->mock('p');

$ENV{OMNI_TEST_KEY_AZ} = 'az-secret-1';
$t->write_file('key-a', "sk-alpha-1\n");

$t->config(<<'EOF');
    omniroute_zone zone=omniroute:1m;

    omniroute_provider anth url=http://127.0.0.1:%%PORT_mock_p%%/anthropic
                       auth=x-api-key header=anthropic-version:2023-06-01;
    omniroute_provider az url=http://127.0.0.1:%%PORT_mock_p%%/openai/deploy
                       auth=header:api-key;
    omniroute_provider open url=http://127.0.0.1:%%PORT_mock_p%%/open
                       kind=local auth=none;

    omniroute_connection a1 provider=anth key_file=%%TESTDIR%%/key-a;
    omniroute_connection z1 provider=az key_env=OMNI_TEST_KEY_AZ;
    omniroute_connection o1 provider=open;

    omniroute_model claude anth/claude-3-5-sonnet-20241022;
    omniroute_model azure az/gpt-4o;
    omniroute_model llama3:8b open/llama3:8b;

    server {
        listen 127.0.0.1:%%PORT_gw%%;

        location /v1 {
            omniroute_pass;
        }

        location /_omniroute {
            internal;
            include %%PARAMS%%;
        }
    }
EOF

$t->run($t->port('gw'));

my %client = (
    'Authorization' => 'Bearer gateway-key-CLIENT',
    'X-Api-Key' => 'client-x-api-key',
    'X-Session-Id' => 'sess-1',
    'x-codex-session-id' => 'codex-1',
    'x-omniroute-session' => 'omni-1',
    'X-OmniRoute-Lease-Owner' => 'vlo_owner',
    'X-OmniRoute-Lease-Generation' => '3',
    'Cookie' => 'session=abc',
    'anthropic-version' => '2000-01-01',
    'anthropic-beta' => 'tools-2024',
    'User-Agent' => 'claude-cli/1.0',
    'Accept-Encoding' => 'gzip',
);

my $body = '{"model":"claude","max_tokens":5,"temperature":0.5,'
    . '"messages":[{"role":"user","content":"caf\u00e9 \"quoted\""}]}';

my $r = $t->post($t->port('gw'), '/v1/messages?beta=true', $body, %client);
is($r->{status}, 200, 'request through an x-api-key provider');

my $got = $m->requests->[0];
my $h = $got->{headers};

is($got->{path}, '/anthropic/messages?beta=true',
   'path: provider path + the part after the location prefix + args');
is($h->{'x-api-key'}, 'sk-alpha-1', 'R-REQ-2 the connection\'s key, not the client\'s');
ok(!exists $h->{authorization}, 'R-REQ-2 the client\'s Authorization is dropped');
for my $n (qw(x-session-id x-codex-session-id x-omniroute-session
              x-omniroute-lease-owner x-omniroute-lease-generation cookie)) {
    ok(!exists $h->{$n}, "R-REQ-2 $n is not forwarded");
}
is($h->{'anthropic-version'}, '2023-06-01',
   'the provider\'s fixed header replaces the client\'s');
is($h->{'anthropic-beta'}, 'tools-2024', 'other client headers pass');
is($h->{'user-agent'}, 'claude-cli/1.0', 'User-Agent passes');
ok(!exists $h->{'accept-encoding'},
   'Accept-Encoding is dropped so error bodies can be read');
is($h->{host}, "127.0.0.1:" . $t->port('mock_p'), 'Host is the provider\'s');

my $sent = JSON::PP::decode_json($got->{body});
is($sent->{model}, 'claude-3-5-sonnet-20241022', 'R-CONF-4 model rewritten');
is($sent->{messages}[0]{content}, "caf\x{e9} \"quoted\"",
   'string content survives the rewrite');
is($sent->{max_tokens}, 5, 'other fields survive the rewrite');
is($h->{'content-length'}, length $got->{body}, 'Content-Length is exact');
like($got->{body}, qr/^\{"model":"claude-3-5-sonnet-20241022","max_tokens"/,
     'field order is preserved');

# named header style, credential from the environment
$r = $t->post($t->port('gw'), '/v1/chat/completions',
              '{"model":"azure"}', %client);
is($r->{status}, 200, 'request through a named-header provider');
$h = $m->requests->[1]{headers};
is($h->{'api-key'}, 'az-secret-1', 'the key is sent in the named header');
ok(!exists $h->{authorization} && !exists $h->{'x-api-key'},
   'and in no other credential header');

# no credential at all; the body is forwarded byte for byte when the
# upstream model equals the client's
my $raw = '{ "model" : "llama3:8b",  "n": 1.10, "x": "\u00e9" }';
$r = $t->post($t->port('gw'), '/v1/chat/completions', $raw, %client);
is($r->{status}, 200, 'request through an auth=none provider');
$got = $m->requests->[2];
ok(!exists $got->{headers}{authorization}
   && !exists $got->{headers}{'x-api-key'}, 'no credential header at all');
is($got->{body}, $raw, 'an unchanged model leaves the body byte for byte');

$r = $t->post($t->port('gw'), '/v1/chat/completions',
              '{"model":"open/llama3:8b"}', %client);
is(JSON::PP::decode_json($m->requests->[3]{body})->{model}, 'llama3:8b',
   'direct target: the upstream model is the part after the provider');

# the path is the client's, escaped again where it must be (a space,
# UTF-8), copied as it is where nothing needs it
$r = $t->post($t->port('gw'), '/v1/chat%20x/caf%C3%A9/completions?y=a%20b',
              '{"model":"open/llama3:8b"}', %client);
is($r->{status}, 200, 'a path with escapes');
is($m->requests->[4]{path}, '/open/chat%20x/caf%C3%A9/completions?y=a%20b',
   'its escapes reach the provider as escapes, the args as they came');

# credentials never appear in the logs
$t->stop;
my $logs = $t->read_file('logs/error.log') . $t->read_file('logs/access.log');
unlike($logs, qr/sk-alpha-1|az-secret-1/, 'R-CONF-6 no credential in the logs');

$t->done;
done_testing;
