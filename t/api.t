#!/usr/bin/perl

# R-API (SPEC §12): the admin JSON API over real state made by traffic,
# nginx with 2 workers: health with breaker state, breaker reset, cooldown
# list and clear (terminal states shown, never cleared there), terminal
# reset, model lockouts list and re-enable; bearer token, 401/404/405.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP;
use Time::HiRes qw(sleep);
use OmniTest;

my $t = OmniTest->new;
my $m = $t->mock('p');

my $TOKEN = 'adm-0123456789-abcdefghij';

$ENV{OMNI_TEST_API_TOKEN} = $TOKEN;
$t->write_file('api-token', "  other-token-9876543210\n");
$t->write_file('key-a1', "sk-a1~status=503\n");
$t->write_file('key-g1', "sk-g1~status=402\n");
$t->write_file('key-g2', "sk-g2~status=429\n");
$t->write_file('key-d1', "sk-d1~status=429\n");
$t->write_file('key-b1', "sk-b1\n");

# nginx -t names the problem
$ENV{OMNI_TEST_SHORT_TOKEN} = 'short';
delete $ENV{OMNI_TEST_UNSET_TOKEN};

for my $bad (
    ['omniroute_api;',
     qr/"omniroute_api" needs "omniroute_api_token env=NAME\|file=PATH"/],
    ['omniroute_api; omniroute_api_token env=OMNI_TEST_UNSET_TOKEN;',
     qr/environment variable "OMNI_TEST_UNSET_TOKEN" is not set or empty/],
    ['omniroute_api; omniroute_api_token env=OMNI_TEST_SHORT_TOKEN;',
     qr/must be 16 to 4096 characters long/],
    ['omniroute_api; omniroute_api_token file=/nonexistent/token;',
     qr/cannot open "\/nonexistent\/token"/],
    ['omniroute_api; omniroute_api_token secret;',
     qr/invalid parameter "secret" of "omniroute_api_token"/],
    ['omniroute_api prefix=admin; omniroute_api_token off;',
     qr/invalid prefix "prefix=admin" of "omniroute_api": must start/],
    ['omniroute_api /a"b; omniroute_api_token off;',
     qr/invalid prefix/],
    ['omniroute_api; omniroute_api; omniroute_api_token off;',
     qr/"omniroute_api" directive is duplicate/],
    ['omniroute_api; omniroute_api_token off; omniroute_api_token off;',
     qr/"omniroute_api_token" directive is duplicate/],
    ['omniroute_api; omniroute_api_token off; '
     . 'omniroute_api_max_body_size 100;',
     qr/"omniroute_api_max_body_size" must be between 1k and 16m/])
{
    $t->config(<<"EOF");
    server {
        listen 127.0.0.1:%%PORT_gw%%;
        location /admin/ { $bad->[0] }
    }
EOF
    my ($rc, $out) = $t->test_config;
    isnt($rc, 0, "nginx -t rejects: $bad->[0]");
    like($out, $bad->[1], 'naming the problem') or diag($out);
}

$t->config(<<'EOF');
    omniroute_zone zone=omniroute:1m;

    omniroute_provider alpha url=http://127.0.0.1:%%PORT_mock_p%%/alpha
                       kind=local;
    omniroute_provider gamma url=http://127.0.0.1:%%PORT_mock_p%%/gamma;
    omniroute_provider delta url=http://127.0.0.1:%%PORT_mock_p%%/delta;
    omniroute_provider beta  url=http://127.0.0.1:%%PORT_mock_p%%/beta;

    omniroute_connection a1 provider=alpha key_file=%%TESTDIR%%/key-a1;
    omniroute_connection g1 provider=gamma key_file=%%TESTDIR%%/key-g1
                         priority=1;
    omniroute_connection g2 provider=gamma key_file=%%TESTDIR%%/key-g2
                         priority=2;
    omniroute_connection d1 provider=delta key_file=%%TESTDIR%%/key-d1;
    omniroute_connection b1 provider=beta key_file=%%TESTDIR%%/key-b1;

    omniroute_combo smart alpha/m1 beta/m2;
    omniroute_combo quota gamma/gpt-5-mini beta/m2;
    omniroute_combo lock  delta/gpt-5-mini beta/m2;

    omniroute_api_token env=OMNI_TEST_API_TOKEN;

    server {
        listen 127.0.0.1:%%PORT_gw%%;

        location /v1/ {
            omniroute_pass;
        }

        location /_omniroute {
            internal;
            include %%PARAMS%%;
        }

        location /api/ {
            omniroute_api;
        }

        location /ops/ {
            omniroute_api prefix=/ops;
            omniroute_api_token file=%%TESTDIR%%/api-token;
        }
    }
EOF

$t->run($t->port('gw'));

my $port = $t->port('gw');

sub api {
    my ($method, $path, $body, %h) = @_;

    $h{Authorization} = "Bearer $TOKEN" unless exists $h{Authorization};
    delete $h{Authorization} unless defined $h{Authorization};

    if (defined $body) {
        $body = encode_json($body) if ref $body;
        $h{'Content-Type'} //= 'application/json';
    }

    my $r = $t->http($port, OmniTest::request_text($method, $path, $body,
                                                   %h));
    $r->{json} = eval { decode_json($r->{body}) };
    return $r;
}

sub chat {
    my ($model) = @_;
    return $t->post($port, '/v1/chat/completions',
                    { model => $model, messages => [] });
}

###########################################################################
# authentication

my $r = api('GET', '/api/monitoring/health', undef, Authorization => undef);
is($r->{status}, 401, 'no token: 401');
is($r->{json}{error}{code}, 'unauthorized', '401 is a JSON error');
like($r->{json}{error}{message}, qr/missing bearer token/,
     'the message says the token is missing');
like($r->{headers}{'www-authenticate'} // '', qr/^Bearer/,
     '401 carries WWW-Authenticate: Bearer');

$r = api('GET', '/api/monitoring/health', undef,
         Authorization => "Bearer ${TOKEN}x");
is($r->{status}, 401, 'a wrong token: 401');
like($r->{json}{error}{message}, qr/invalid bearer token/,
     'the message says the token is invalid');

$r = api('GET', '/api/monitoring/health', undef,
         Authorization => "Basic $TOKEN");
is($r->{status}, 401, 'a non-bearer Authorization: 401');

$r = api('GET', '/api/monitoring/health', undef,
         Authorization => 'Bearer ' . substr($TOKEN, 0, 10));
is($r->{status}, 401, 'a prefix of the token: 401');

$r = api('GET', '/api/monitoring/health', undef,
         Authorization => "bearer $TOKEN");
is($r->{status}, 200, 'the scheme is case-insensitive');

$r = api('GET', '/api/nope');
is($r->{status}, 404, 'unknown endpoint: 404');
is($r->{json}{error}{code}, 'unknown_endpoint', '404 is a JSON error');

$r = api('GET', '/api/nope', undef, Authorization => undef);
is($r->{status}, 401, 'unknown endpoint without a token: 401 first');

$r = api('PUT', '/api/monitoring/health', '{}');
is($r->{status}, 405, 'PUT on health: 405');
is($r->{json}{error}{code}, 'method_not_allowed', '405 is a JSON error');
is($r->{headers}{allow}, 'GET, HEAD', '405 lists the allowed methods');

$r = api('GET', '/api/resilience/reset');
is($r->{status}, 405, 'GET on the reset endpoint: 405');
is($r->{headers}{allow}, 'POST', 'Allow: POST');

$r = api('HEAD', '/api/monitoring/health');
is($r->{status}, 200, 'HEAD health: 200');
is($r->{body}, '', 'HEAD has no body');

# a second location: its own prefix and a token read from a file
$r = api('GET', '/ops/api/monitoring/health', undef,
         Authorization => 'Bearer other-token-9876543210');
is($r->{status}, 200, 'prefix=/ops with the file token: 200');
ok($r->{json}{providers}{alpha}, 'the same health document');
like($r->{headers}{'content-type'}, qr{^application/json},
     'JSON content type');
is($r->{headers}{'cache-control'}, 'no-store', 'Cache-Control: no-store');

$r = api('GET', '/ops/api/monitoring/health');
is($r->{status}, 401, 'the other location\'s token does not open /ops');

$r = api('GET', '/ops/api/monitoring/health/', undef,
         Authorization => 'Bearer other-token-9876543210');
is($r->{status}, 200, 'a trailing slash is accepted');

###########################################################################
# health and breaker reset (R-CB-4: read state is normalized)

$r = api('GET', '/api/monitoring/health');
is($r->{status}, 200, 'health: 200');
is($r->{json}{status}, 'ok', 'fresh: status ok');
is_deeply([sort keys %{$r->{json}{providers}}],
          [qw(alpha beta delta gamma)], 'every configured provider');
my $al = $r->{json}{providers}{alpha};
is($al->{state}, 'CLOSED', 'fresh breaker CLOSED');
is($al->{kind}, 'local', 'kind');
is($al->{open_threshold}, 2, 'local profile: opens at 2');
is($al->{retry_after_ms}, 0, 'retry-after 0');
is_deeply($al->{connections}, { total => 1, active => 1, cooldown => 0,
                               terminal => 0 }, 'connection counts');

# two provider-level failures open a local provider's breaker; the
# connection's 1 s cooldown is waited out in between
chat('smart');
sleep(1.2);
$r = chat('smart');
is($r->{status}, 200, 'the combo still answers through beta');

$r = api('GET', '/api/monitoring/health');
$al = $r->{json}{providers}{alpha};
is($al->{state}, 'OPEN', 'two 503s opened alpha\'s breaker');
is($r->{json}{status}, 'degraded', 'status degraded');
is($al->{failures}, 2, 'failures 2');
ok($al->{retry_after_ms} > 10000 && $al->{retry_after_ms} <= 15000,
   "retry-after within the 15 s reset ($al->{retry_after_ms} ms)");
is($al->{retry_after_s}, int(($al->{retry_after_ms} + 999) / 1000),
   'retry_after_s rounds up');
is($al->{last_reason}, 'server_error', 'last reason server_error');
ok($al->{open_until} > $r->{json}{time}, 'open_until in the future');
is($r->{json}{providers}{beta}{state}, 'CLOSED', 'beta CLOSED');
ok($r->{json}{stats}{fallbacks}{server_error} >= 1,
   'health carries fallback totals');

$r = api('POST', '/api/resilience/reset', { provider => 'nope' });
is($r->{status}, 404, 'reset of an unknown provider: 404');
is($r->{json}{error}{code}, 'unknown_provider', 'code unknown_provider');
like($r->{json}{error}{message}, qr/"nope"/, 'the message names it');
is(api('GET', '/api/monitoring/health')->{json}{providers}{alpha}{state},
   'OPEN', 'and nothing was reset');

$r = api('POST', '/api/resilience/reset', { provider => 'alpha' });
is($r->{status}, 200, 'reset alpha: 200');
is_deeply($r->{json}, { reset => ['alpha'], unchanged => [] },
          'alpha was reset');

$r = api('GET', '/api/monitoring/health');
is($r->{json}{providers}{alpha}{state}, 'CLOSED', 'alpha CLOSED again');
is($r->{json}{providers}{alpha}{failures}, 0, 'failures cleared');
is($r->{json}{status}, 'ok', 'status ok');

$r = api('POST', '/api/resilience/reset');
is($r->{status}, 200, 'reset all without a body: 200');
is_deeply([sort @{$r->{json}{unchanged}}], [qw(alpha beta delta gamma)],
          'nothing left to reset');

like($t->error_log, qr/breaker of provider "alpha" reset/,
     'the reset is logged');

###########################################################################
# cooldowns: list, clear, terminal states

# g1 answers 402 (credits exhausted: terminal), g2 429 (rate limited)
$r = chat('quota');
is($r->{status}, 200, 'quota combo answered by beta');
is($r->{headers}{'x-omniroute-attempts'}, 3, 'after g1 and g2 failed');

$r = api('GET', '/api/resilience/cooldowns?provider=gamma');
is($r->{status}, 200, 'cooldowns of gamma: 200');
my %c = map { $_->{id} => $_ } @{$r->{json}{connections}};
is_deeply([sort keys %c], [qw(g1 g2)], 'only gamma\'s connections');
is($c{g1}{status}, 'terminal', 'g1 terminal');
is($c{g1}{terminal}, 'credits_exhausted', 'credits_exhausted');
is($c{g1}{last_status}, 402, 'last status 402');
is($c{g1}{retry_after_ms}, undef, 'a terminal state has no retry-after');
is($c{g2}{status}, 'cooldown', 'g2 cooling down');
is($c{g2}{last_error_type}, 'rate_limit_exceeded', 'rate limited');
ok($c{g2}{retry_after_ms} > 0, 'with a remaining time');
ok($c{g2}{until} > $r->{json}{time}, 'until in the future');
is_deeply($r->{json}{summary}, { total => 2, active => 0, cooldown => 1,
                                 terminal => 1, lockouts => 0 },
          'summary');

$r = api('GET', '/api/resilience/cooldowns');
is(scalar @{$r->{json}{connections}}, 5, 'unfiltered: all connections');

$r = api('GET', '/api/resilience/cooldowns?provider=nope');
is($r->{status}, 404, 'unknown provider filter: 404');

$r = api('GET', '/api/monitoring/health');
is_deeply($r->{json}{providers}{gamma}{connections},
          { total => 2, active => 0, cooldown => 1, terminal => 1 },
          'health counts gamma\'s connections by state');

$r = api('POST', '/api/resilience/cooldowns',
         { connectionIds => ['g1', 'g2'] });
is($r->{status}, 200, 'clear g1 and g2: 200');
is($r->{json}{cleared}, 1, 'g2 cleared');
is($r->{json}{skippedTerminal}, 1, 'g1 skipped: terminal');
is($r->{json}{unchanged}, 0, 'nothing unchanged');
is($r->{json}{lockoutsCleared}, 0, 'no lockouts');
is_deeply($r->{json}{connections}, { g1 => 'skippedTerminal',
                                     g2 => 'cleared' }, 'per connection');

$r = api('GET', '/api/resilience/cooldowns?provider=gamma');
%c = map { $_->{id} => $_ } @{$r->{json}{connections}};
is($c{g2}{status}, 'active', 'g2 active again');
is($c{g2}{backoff_level}, 0, 'backoff level reset');
is($c{g1}{terminal}, 'credits_exhausted', 'g1 still terminal');

$r = api('POST', '/api/resilience/cooldowns',
         { all => JSON::PP::true, provider => 'gamma' });
is($r->{status}, 200, 'clear all of gamma: 200');
is($r->{json}{unchanged}, 1, 'g2 unchanged');
is($r->{json}{skippedTerminal}, 1, 'g1 skipped again');

$r = api('POST', '/api/resilience/cooldowns', { all => JSON::PP::true });
is($r->{status}, 200, 'clear all: 200');
is($r->{json}{cleared} + $r->{json}{unchanged} + $r->{json}{skippedTerminal},
   5, 'every connection accounted for');

# the operator's terminal reset
$r = api('POST', '/api/resilience/terminal-reset', { connectionId => 'g1' });
is($r->{status}, 200, 'terminal reset of g1: 200');
is_deeply($r->{json}, { connectionId => 'g1', reset => JSON::PP::true,
                        previous => 'credits_exhausted' },
          'reports the state it cleared');

$r = api('GET', '/api/resilience/cooldowns?provider=gamma');
%c = map { $_->{id} => $_ } @{$r->{json}{connections}};
is($c{g1}{status}, 'active', 'g1 active after the reset');

$r = api('POST', '/api/resilience/terminal-reset', { connectionId => 'g1' });
is_deeply($r->{json}, { connectionId => 'g1', reset => JSON::PP::false,
                        previous => undef }, 'a second reset: nothing');

like($t->error_log, qr/terminal state "credits_exhausted" of connection "g1" reset/,
     'the terminal reset is logged');

###########################################################################
# model lockouts (R-ML-5)

$r = api('PATCH', '/api/resilience',
         { providers => { delta => { model_lockout => {
             enabled => JSON::PP::true } } } });
is($r->{status}, 200, 'model lockout enabled for delta at runtime');

$r = chat('lock');
is($r->{headers}{'x-omniroute-connection'}, 'b1', 'd1 failed over to b1');

$r = api('GET', '/api/resilience/model-cooldowns');
is($r->{status}, 200, 'model cooldowns: 200');
is($r->{json}{count}, 1, 'one active lockout');
my $l = $r->{json}{lockouts}[0];
is($l->{provider}, 'delta', 'provider');
is($l->{connection}, 'd1', 'connection');
is($l->{model}, 'gpt-5-mini', 'model');
is($l->{scope}, 'family', '429: quota-family scope (R-ML-2)');
is($l->{reason}, 'rate_limit_exceeded', 'reason');
is($l->{status}, 429, 'status');
ok($l->{expires_at} > $r->{json}{time}, 'expires_at in the future');
ok($l->{retry_after_ms} > 100000 && $l->{retry_after_ms} <= 120000,
   'base cooldown 120 s');

is(api('GET', '/api/resilience/model-cooldowns?provider=alpha')
   ->{json}{count}, 0, 'filter by provider');
is(api('GET', '/api/resilience/model-cooldowns?connection=d1')
   ->{json}{count}, 1, 'filter by connection');
is(api('GET', '/api/resilience/model-cooldowns?connection=zz')->{status},
   404, 'unknown connection filter: 404');

$r = api('GET', '/api/resilience/cooldowns?provider=delta');
is(scalar @{$r->{json}{connections}[0]{lockouts}}, 1,
   'the cooldown list shows the connection\'s lockouts');

$r = api('DELETE', '/api/resilience/model-cooldowns',
         { provider => 'delta', connection => 'd1', model => 'gpt-5-mini' });
is($r->{status}, 200, 're-enable: 200');
is_deeply($r->{json}, { cleared => 1 }, 'one lockout cleared');
is(api('GET', '/api/resilience/model-cooldowns')->{json}{count}, 0,
   'no active lockout left');

$r = api('DELETE', '/api/resilience/model-cooldowns',
         { provider => 'delta', connection => 'd1', model => 'gpt-5-mini' });
is_deeply($r->{json}, { cleared => 0 }, 'idempotent');

$r = chat('lock');
is($r->{headers}{'x-omniroute-attempts'}, 2, 'the model was tried again');
is(api('GET', '/api/resilience/model-cooldowns')->{json}{count}, 1,
   'and locked again');

$r = api('POST', '/api/resilience/cooldowns', { connectionIds => ['d1'] });
is($r->{json}{lockoutsCleared}, 1, 'clearing d1 clears its lockout');
is(api('GET', '/api/resilience/model-cooldowns')->{json}{count}, 0,
   'no active lockout left');

$t->done;

done_testing;
