#!/usr/bin/perl

# R-LEASE-1: client gateway keys declared in nginx.conf, kept as SHA-256:
# without a key or with a wrong one (Bearer or x-api-key) a request gets
# 401 before any body work; a key's models, connections and path
# prefixes limit what it may ask (403 naming what is not allowed), its
# connections filter the candidates; a location without keys stays open;
# the key never reaches a provider, a log or the metrics (its id does).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Digest::SHA qw(sha256_hex);
use OmniTest;

my $t = OmniTest->new;
my $m = $t->mock('p');

my $KEY_FULL = 'sk-client-full-0123456789abcdef';
my $KEY_HASH = 'sk-client-hash-0123456789abcdef';
my $KEY_MSG = 'sk-client-msgs-0123456789abcdef';
my $KEY_MODELS = 'sk-client-mods-0123456789abcdef';
my $HASH = sha256_hex($KEY_HASH);

$t->write_file('key-a1', "sk-up-a1\n");
$t->write_file('key-a2', "sk-up-a2\n");
$t->write_file('key-b1', "sk-up-b1\n");
$t->write_file('client-full', "$KEY_FULL\n");
$t->write_file('client-models', "$KEY_MODELS\n");
$t->write_file('client-msg', "  $KEY_MSG  \n");
$t->write_file('client-short', "short-key\n");

my $COMMON = <<'EOF';
    omniroute_zone zone=omniroute:1m;

    omniroute_provider alpha url=http://127.0.0.1:%%PORT_mock_p%%/alpha;
    omniroute_provider beta url=http://127.0.0.1:%%PORT_mock_p%%/beta;

    omniroute_connection a1 provider=alpha key_file=%%TESTDIR%%/key-a1
                         priority=2;
    omniroute_connection a2 provider=alpha key_file=%%TESTDIR%%/key-a2
                         priority=1;
    omniroute_connection b1 provider=beta key_file=%%TESTDIR%%/key-b1;

    omniroute_model gpt-4o alpha/gpt-4o-2024;
    omniroute_model beta-only beta/m;
EOF

###########################################################################
# configuration errors

for my $bad (
    ['omniroute_client_key "a b" sha256=00;',
     qr/invalid client key id "a b"/],
    ['omniroute_client_key k1;', qr/invalid number of arguments/],
    ['omniroute_client_key k1 models=x;',
     qr/client key "k1" needs "sha256=HEX" or "file=PATH"/],
    ['omniroute_client_key k1 sha256=abc;',
     qr/invalid "sha256=" of client key "k1"/],
    ['omniroute_client_key k1 file=%%TESTDIR%%/client-short;',
     qr/client key "k1" from ".*client-short" must be 16 to 4096/],
    ['omniroute_client_key k1 file=%%TESTDIR%%/none;',
     qr/client key file: cannot open/],
    ["omniroute_client_key k1 sha256=$HASH connections=zz;",
     qr/client key "k1" names unknown connection "zz"/],
    ["omniroute_client_key k1 sha256=$HASH scope=lease:exclusive;",
     qr/"scope=lease:exclusive" needs "connections="/],
    ["omniroute_client_key k1 sha256=$HASH scope=admin;",
     qr/invalid parameter "scope=admin" of client key "k1": the only scope/],
    ["omniroute_client_key k1 sha256=$HASH paths=v1;",
     qr/invalid item "v1" in "paths=v1"/],
    ["omniroute_client_key k1 sha256=$HASH models=a,,b;",
     qr/invalid item "" in "models=a,,b"/],
    ["omniroute_client_key k1 sha256=$HASH; "
     . "omniroute_client_key k2 sha256=$HASH;",
     qr/client keys "k1" and "k2" are the same key/],
    ["omniroute_client_key k1 sha256=$HASH; "
     . "omniroute_client_key k1 file=%%TESTDIR%%/client-full;",
     qr/client key "k1" is declared twice/],
    ['omniroute_client_keys on;',
     qr/"omniroute_client_keys" is on but no "omniroute_client_key" is /],
    ["omniroute_client_key k1 sha256=$HASH; omniroute_client_keys k9;",
     qr/"omniroute_client_keys" names unknown client key "k9"/],
    ['omniroute_lease_ttl 0;', qr/invalid lease ttl "0"/],
    ['omniroute_lease_ttl 2h;', qr/invalid lease ttl "2h"/])
{
    $t->config($COMMON . <<"EOF");
    $bad->[0]
    server { listen 127.0.0.1:%%PORT_gw%%; location /v1/ { omniroute_pass; } }
EOF
    my ($rc, $out) = $t->test_config;
    isnt($rc, 0, "rejected: $bad->[0]");
    like($out, $bad->[1], 'with a message naming the problem')
        or diag($out);
    unlike($out, qr/\Q$KEY_FULL\E|short-key/, 'and never the key');
}

for my $loc ('omniroute_pass; omniroute_session_leases;',
             'omniroute_session_leases; omniroute_pass;')
{
    $t->config($COMMON . <<"EOF");
    omniroute_client_key k1 sha256=$HASH connections=a1
                         scope=lease:exclusive;
    server { listen 127.0.0.1:%%PORT_gw%%; location /l { $loc } }
EOF
    my ($rc, $out) = $t->test_config;
    isnt($rc, 0, "rejected: $loc");
    like($out, qr/"omniroute_session_leases"( directive)? cannot be used in/,
         'a lease endpoint is not a gateway location');
}

$t->config($COMMON . <<"EOF");
    omniroute_client_key k1 sha256=$HASH;
    server { listen 127.0.0.1:%%PORT_gw%%;
             location /l { omniroute_session_leases; } }
EOF
my ($rc, $out) = $t->test_config;
like($out, qr/"omniroute_session_leases" needs an "omniroute_client_key" with/,
     'a lease endpoint needs a key with the lease scope');

###########################################################################
# a gateway with keys

$t->config($COMMON . <<"EOF");
    omniroute_combo both alpha/gpt-4o-2024 beta/m;

    omniroute_client_key k-full file=%%TESTDIR%%/client-full;
    omniroute_client_key k-models file=%%TESTDIR%%/client-models
                         models=gpt-4o,both;
    omniroute_client_key k-hash sha256=$HASH
                         models=gpt-4o,alpha/*,both,beta-only
                         connections=a1 paths=/v1/chat/,/only/;
    omniroute_client_key k-msg file=%%TESTDIR%%/client-msg
                         paths=/v1/messages;

    log_format keys '\$request_uri key=\$omniroute_client_key '
                    'conn=\$omniroute_connection status=\$status';

    server {
        listen 127.0.0.1:%%PORT_gw%%;
        access_log %%TESTDIR%%/logs/keys.log keys;

        location /v1/ {
            omniroute_pass;
        }

        location /open/ {
            omniroute_pass;
            omniroute_client_keys off;
        }

        location /only/ {
            omniroute_pass;
            omniroute_client_keys k-hash;
        }

        location /_omniroute {
            internal;
            include %%PARAMS%%;
        }

        location = /metrics {
            omniroute_api;
            omniroute_api_token off;
        }
    }
EOF

$t->run($t->port('gw'));

my $gw = $t->port('gw');
my $chat = '/v1/chat/completions';

sub is_error {
    my ($r, $status, $code, $name) = @_;
    is($r->{status}, $status, "$name: status $status");
    my $doc = OmniTest::json($r);
    ok($doc && ref $doc->{error} eq 'HASH' && defined $doc->{error}{message}
       && defined $doc->{error}{type}, "$name: OpenAI error shape")
        or diag($r->{body});
    is($doc && $doc->{error}{code}, $code, "$name: code $code");
    return $doc || {};
}

sub seen { scalar @{$m->requests} }

# 401

my $r = $t->post($gw, $chat, { model => 'gpt-4o' });
my $doc = is_error($r, 401, 'invalid_api_key', 'no key');
is($doc->{error}{type}, 'invalid_request_error', 'no key: the OpenAI type');
like($r->{headers}{'www-authenticate'} // '', qr/^Bearer realm="omniroute"/,
     'no key: WWW-Authenticate');

is_error($t->post($gw, $chat, { model => 'gpt-4o' },
                  Authorization => 'Bearer sk-wrong-0123456789abcdef'),
         401, 'invalid_api_key', 'a wrong Bearer key');
is_error($t->post($gw, $chat, { model => 'gpt-4o' },
                  'x-api-key' => 'sk-wrong-0123456789abcdef'),
         401, 'invalid_api_key', 'a wrong x-api-key');
is_error($t->post($gw, $chat, { model => 'gpt-4o' },
                  Authorization => "Basic $KEY_FULL"),
         401, 'invalid_api_key', 'another scheme than Bearer');
is_error($t->post($gw, $chat, { model => 'gpt-4o' },
                  Authorization => "Bearer ${KEY_FULL}x"),
         401, 'invalid_api_key', 'a key with one more character');
is_error($t->post($gw, $chat, 'not json {'),
         401, 'invalid_api_key', 'no key, bad body: 401 before the body');
is_error($t->get($gw, $chat), 401, 'invalid_api_key', 'GET without a key');
is(seen(), 0, 'no provider saw any of them');

# a valid key

$r = $t->post($gw, $chat, { model => 'gpt-4o' },
              Authorization => "Bearer $KEY_FULL");
is($r->{status}, 200, 'Authorization: Bearer with a valid key');
$r = $t->post($gw, $chat, { model => 'gpt-4o' }, 'x-api-key' => $KEY_FULL);
is($r->{status}, 200, 'x-api-key with a valid key');
$r = $t->post($gw, $chat, { model => 'gpt-4o' },
              Authorization => "bearer   $KEY_FULL ");
is($r->{status}, 200, 'the scheme in any case, spaces around the key');

my @req = @{$m->requests};
is(scalar @req, 3, 'three provider calls');
my $leak = grep { ($_->{headers}{authorization} // '') =~ /client/
                  || ($_->{headers}{'x-api-key'} // '') =~ /client/ } @req;
is($leak, 0, 'the client key never reaches the provider');
is($req[0]{headers}{authorization}, 'Bearer sk-up-a2',
   'the connection key is sent instead');

is_error($t->get($gw, $chat, Authorization => "Bearer $KEY_FULL"),
         405, 'method_not_allowed', 'GET with a key');
is_error($t->get($gw, '/v1/models'), 401, 'invalid_api_key',
         'GET /v1/models without a key');
$r = $t->get($gw, '/v1/models', Authorization => "Bearer $KEY_FULL");
is($r->{status}, 200, 'GET /v1/models with a key');
like($r->{body}, qr/"gpt-4o"/, 'the list of models');

# a key with models= sees only those (the list and one model)
$r = $t->get($gw, '/v1/models', Authorization => "Bearer $KEY_MODELS");
is($r->{status}, 200, 'GET /v1/models with a key limited to two models');
is_deeply([sort map { $_->{id} } @{OmniTest::json($r)->{data}}],
          ['both', 'gpt-4o'], 'only the models the key may ask for');
is($t->get($gw, '/v1/models/beta-only',
           Authorization => "Bearer $KEY_MODELS")->{status}, 404,
   'another model is not found for that key');
is($t->get($gw, '/v1/models/both',
           Authorization => "Bearer $KEY_MODELS")->{status}, 200,
   'one of its own is');

$m->clear;

# models

is_error($t->post($gw, $chat, { model => 'smart' },
                  Authorization => "Bearer $KEY_HASH"),
         403, 'model_not_allowed', 'a model the key may not use');
$r = $t->post($gw, $chat, { model => 'gpt-5' },
              Authorization => "Bearer $KEY_HASH");
like(OmniTest::json($r)->{error}{message},
     qr/"k-hash" may not use the model "gpt-5"/,
     'the message names the key and the model');
is(OmniTest::json($t->post($gw, $chat, { model => 'nonexistent' },
                           Authorization => "Bearer $KEY_HASH"))->{error}{code},
   'model_not_allowed', 'an unknown model the key may not use: 403, not 404');
is(OmniTest::json($t->post($gw, $chat, { model => 'nonexistent' },
                           Authorization => "Bearer $KEY_FULL"))->{error}{code},
   'model_not_found', 'an unknown model for a key without limits: 404');

# connections

$r = $t->post($gw, $chat, { model => 'gpt-4o' },
              Authorization => "Bearer $KEY_HASH");
is($r->{status}, 200, 'an allowed model');
is($r->{headers}{'x-omniroute-connection'}, 'a1',
   'on the key\'s connection a1, not a2 (priority 1)');
$r = $t->post($gw, $chat, { model => 'alpha/other' },
              Authorization => "Bearer $KEY_HASH");
is($r->{status}, 200, 'a model of a prefix pattern');
is($r->{headers}{'x-omniroute-connection'}, 'a1', 'on a1 too');
$r = $t->post($gw, $chat, { model => 'both' },
              Authorization => "Bearer $KEY_HASH");
is($r->{headers}{'x-omniroute-connection'}, 'a1', 'a combo: a1 only');

$m->clear;
$doc = is_error($t->post($gw, $chat, { model => 'beta-only' },
                         Authorization => "Bearer $KEY_HASH"),
                403, 'connection_not_allowed',
                'a model only other connections serve');
like($doc->{error}{message},
     qr/"k-hash" may not use any connection .* "beta-only"/,
     'the message names the key and the model');

# paths

$doc = is_error($t->post($gw, '/v1/fine_tuning/jobs', { model => 'gpt-4o' },
                         Authorization => "Bearer $KEY_HASH"),
                403, 'path_not_allowed', 'a path outside the key\'s prefixes');
like($doc->{error}{message},
     qr{"k-hash" may not use the path "/v1/fine_tuning/jobs"},
     'the message names the key and the path');
is_error($t->post($gw, '/v1/chat/../fine_tuning/jobs', { model => 'gpt-4o' },
                  Authorization => "Bearer $KEY_HASH"),
         403, 'path_not_allowed', 'dot segments do not escape the prefix');
is_error($t->post($gw, '/v1/%63hat/../files', { model => 'gpt-4o' },
                  Authorization => "Bearer $KEY_HASH"),
         403, 'path_not_allowed', 'nor escapes');
is_error($t->post($gw, '/v1/messagesX', { model => 'gpt-4o' },
                  Authorization => "Bearer $KEY_MSG"),
         403, 'path_not_allowed', 'a prefix matches whole segments');
is(seen(), 0, 'no provider saw them');
is($t->post($gw, '/v1/messages', { model => 'gpt-4o' },
            'x-api-key' => $KEY_MSG)->{status}, 200,
   'the path itself (a key read from a file, spaces trimmed)');
is($t->post($gw, '/v1/messages/count_tokens', { model => 'gpt-4o' },
            'x-api-key' => $KEY_MSG)->{status}, 200, 'below it');

# locations

is($t->post($gw, '/open/chat', { model => 'gpt-4o' })->{status}, 200,
   'omniroute_client_keys off: open without a key');
is_error($t->post($gw, '/only/chat', { model => 'gpt-4o' },
                  Authorization => "Bearer $KEY_FULL"),
         403, 'key_not_allowed', 'a location for other keys');
is($t->post($gw, '/only/chat', { model => 'gpt-4o' },
            Authorization => "Bearer $KEY_HASH")->{status}, 200,
   'the location\'s key');

# the candidates are filtered: a1 failing does not fall over to a2

$m->set_behavior('status=503');
$r = $t->post($gw, $chat, { model => 'gpt-4o' },
              Authorization => "Bearer $KEY_HASH");
is($r->{status}, 503, 'the only allowed connection fails');
is($r->{headers}{'x-omniroute-attempts'}, 1,
   'no fallback to a connection the key may not use');
$m->set_behavior(undef);

$m->clear;

# logs and metrics: ids, never keys

my $log = $t->read_file('logs/keys.log');
like($log, qr{^/v1/chat/completions key=k-full conn=a2 status=200$}m,
     '$omniroute_client_key in the access log');
like($log, qr{^/v1/chat/completions key=k-hash conn=a1 status=200$}m,
     'for each key');
like($log, qr{^/v1/chat/completions key=- conn=- status=401$}m,
     'empty without a valid key');

$r = $t->get($gw, '/metrics');
is($r->{status}, 200, 'metrics');
like($r->{body},
     qr/^omniroute_client_key_requests_total\{key="k-full",status="2xx"\} 4$/m,
     'requests by key id and status class');
like($r->{body},
     qr/^omniroute_client_key_requests_total\{key="k-hash",status="4xx"\} \d/m,
     'refused ones too');
like($r->{body},
     qr/^omniroute_client_auth_failures_total\{reason="missing_key"\} [1-9]/m,
     'missing keys counted');
like($r->{body},
     qr/^omniroute_client_auth_failures_total\{reason="invalid_key"\} [1-9]/m,
     'invalid keys counted');

for my $where (['access log', $log], ['error log', $t->error_log],
               ['metrics', $r->{body}])
{
    unlike($where->[1], qr/sk-client|\Q$HASH\E/,
           "no key (nor its hash) in the $where->[0]");
}

$t->done;

done_testing;
