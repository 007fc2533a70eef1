#!/usr/bin/perl

# R-CONF-5, R-ENV, R-CLASS-4 through the admin API: GET /api/resilience
# reports every effective setting with its source; the precedence is
# built-in default < environment variable < nginx.conf < runtime (PATCH);
# runtime values are used by the request path of every worker, persist in
# the zone across a reload, and null removes them again.  Operator error
# rules and catch-all defaults are set by directives and at runtime.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP;
use OmniTest;

my $t = OmniTest->new;
my $m = $t->mock('p');

my $TOKEN = 'adm-0123456789-abcdefghij';

# environment defaults, read by the master when the configuration loads
$ENV{OMNI_TEST_API_TOKEN} = $TOKEN;
$ENV{OMNIROUTE_CIRCUIT_BREAKER_API_KEY_THRESHOLD} = '20';
$ENV{OMNIROUTE_CIRCUIT_BREAKER_OAUTH_RESET_MS} = '90000';
$ENV{OMNIROUTE_PROVIDER_BREAKER_API_KEY_COOLDOWN_MS} = '120000';
$ENV{PROVIDER_COOLDOWN_ENABLED} = 'true';
$ENV{OMNIROUTE_ROTATION_RATE_LIMIT_RESET_SECONDS} = '45';
$ENV{RATE_LIMIT_MAX_QUEUE_DEPTH} = '77';
$ENV{RATE_LIMIT_MAX_WAIT_MS} = '999999999999';
$ENV{RATE_LIMIT_EXECUTION_MAX_WAIT_MS} = '120000';
$ENV{STREAM_THROUGHPUT_WATCHDOG_ENABLED} = 'maybe';

$t->write_file('key-e1', "sk-e1~status=503\n");
$t->write_file('key-c1', "sk-c1~status=429,body=insufficient%20funds\n");
$t->write_file('key-b1', "sk-b1\n");

$t->config(<<'EOF');
    omniroute_zone zone=omniroute:1m;

    omniroute_provider envp url=http://127.0.0.1:%%PORT_mock_p%%/envp;
    omniroute_provider confp url=http://127.0.0.1:%%PORT_mock_p%%/confp
                       breaker_failures=9 cooldown_base=2s;
    omniroute_provider oap url=http://127.0.0.1:%%PORT_mock_p%%/oap
                       kind=oauth;
    omniroute_provider beta url=http://127.0.0.1:%%PORT_mock_p%%/beta;

    omniroute_error_rule confp id=funds status=429 match=insufficient
                         reason=quota_exhausted cooldown=2h;
    omniroute_error_default confp cooldown=10m;

    omniroute_connection e1 provider=envp key_file=%%TESTDIR%%/key-e1;
    omniroute_connection c1 provider=confp key_file=%%TESTDIR%%/key-c1;
    omniroute_connection o1 provider=oap key_file=%%TESTDIR%%/key-b1;
    omniroute_connection b1 provider=beta key_file=%%TESTDIR%%/key-b1;

    omniroute_combo ec envp/m beta/m;
    omniroute_combo cc confp/m beta/m;

    server {
        listen 127.0.0.1:%%PORT_gw%%;

        location /v1/ {
            omniroute_pass;
        }

        location /_omniroute {
            internal;
            include %%PARAMS%%;
        }

        location / {
            omniroute_api;
            omniroute_api_token env=OMNI_TEST_API_TOKEN;
        }
    }
EOF

$t->run($t->port('gw'));

my $port = $t->port('gw');

sub api {
    my ($method, $path, $body) = @_;

    my %h = (Authorization => "Bearer $TOKEN");

    if (defined $body) {
        $body = encode_json($body) if ref $body;
        $h{'Content-Type'} = 'application/json';
    }

    my $r = $t->http($port, OmniTest::request_text($method, $path, $body,
                                                   %h));
    $r->{json} = eval { decode_json($r->{body}) };
    return $r;
}

sub settings { api('GET', '/api/resilience')->{json} }

# value and source of providers.P.GROUP.NAME
sub vs {
    my ($doc, $p, $g, $n) = @_;
    my $x = $doc->{providers}{$p};
    return [$x->{$g}{$n}, $x->{sources}{$g}{$n}];
}

###########################################################################
# default < env < conf

my $s = settings();

is_deeply(vs($s, 'envp', 'breaker', 'open_threshold'), [20, 'env'],
          'apikey open threshold from OMNIROUTE_CIRCUIT_BREAKER_API_KEY_'
          . 'THRESHOLD');
is_deeply(vs($s, 'envp', 'breaker', 'degrade_threshold'), [12, 'default'],
          'degrade threshold derived from it (round(0.6 x 20))');
is_deeply(vs($s, 'confp', 'breaker', 'open_threshold'), [9, 'conf'],
          'breaker_failures=9 in nginx.conf wins over the environment');
is_deeply(vs($s, 'confp', 'cooldown', 'base_cooldown_ms'), [2000, 'conf'],
          'cooldown_base=2s from nginx.conf');
is_deeply(vs($s, 'envp', 'cooldown', 'base_cooldown_ms'), [3000, 'default'],
          'apikey default base cooldown 3 s');
is_deeply(vs($s, 'oap', 'breaker', 'reset_timeout_ms'), [90000, 'env'],
          'oauth reset from OMNIROUTE_CIRCUIT_BREAKER_OAUTH_RESET_MS');
is_deeply(vs($s, 'oap', 'breaker', 'open_threshold'), [8, 'default'],
          'oauth default open threshold 8 (the apikey variable does not '
          . 'apply)');
is_deeply(vs($s, 'oap', 'breaker', 'probe_timeout_ms'), [90000, 'default'],
          'probe timeout follows the reset timeout');
is_deeply(vs($s, 'envp', 'breaker', 'provider_cooldown_enabled'),
          [JSON::PP::true, 'env'], 'PROVIDER_COOLDOWN_ENABLED=true');
is_deeply(vs($s, 'envp', 'breaker', 'provider_cooldown_ms'),
          [120000, 'env'], 'OMNIROUTE_PROVIDER_BREAKER_API_KEY_COOLDOWN_MS');
is_deeply(vs($s, 'oap', 'breaker', 'provider_cooldown_ms'),
          [300000, 'default'], 'not for oauth providers');
is_deeply(vs($s, 'envp', 'cooldown', 'rate_limit_reset_ms'),
          [45000, 'env'], 'OMNIROUTE_ROTATION_RATE_LIMIT_RESET_SECONDS=45');
is_deeply(vs($s, 'envp', 'cooldown', 'retry_delay_ms'), [undef, 'default'],
          'no retry delay: null');
is_deeply(vs($s, 'envp', 'model_lockout', 'error_codes'),
          [[403, 404, 429, 502, 503, 504], 'default'],
          'lockout error codes (R-ML-3)');

my $g = $s->{global};
is($g->{request_queue}{max_queue_depth}, 77, 'RATE_LIMIT_MAX_QUEUE_DEPTH');
is($g->{sources}{request_queue}{max_queue_depth}, 'env', 'source env');
is($g->{request_queue}{max_wait_ms}, 86400000,
   'RATE_LIMIT_MAX_WAIT_MS clamped to 24 h');
is($g->{request_queue}{execution_max_wait_ms}, 120000,
   'RATE_LIMIT_EXECUTION_MAX_WAIT_MS');
is($g->{stream}{throughput_watchdog}, JSON::PP::false,
   'an invalid STREAM_THROUGHPUT_WATCHDOG_ENABLED is ignored');
is($g->{sources}{stream}{throughput_watchdog}, 'default', 'source default');

like($t->error_log, qr/environment variable RATE_LIMIT_MAX_WAIT_MS is out of range .* clamped to 86400000/,
     'the clamp is logged');
like($t->error_log, qr/environment variable STREAM_THROUGHPUT_WATCHDOG_ENABLED has an invalid value, ignored/,
     'the invalid value is logged');

# operator rules from nginx.conf
my $c = $s->{providers}{confp};
is($c->{sources}{error_rules}, 'conf', 'error rules from nginx.conf');
is_deeply($c->{error_rules}, [{ id => 'funds', status => 429,
                                match => 'insufficient',
                                reason => 'quota_exhausted',
                                scope => undef, cooldown_ms => 7200000 }],
          'the rule as configured');
is_deeply($c->{error_default}, { cooldown_ms => 600000,
                                 scope => 'connection', reason => undef },
          'the catch-all default as configured');
is($c->{sources}{error_default}, 'conf', 'default from nginx.conf');
is($s->{providers}{envp}{sources}{error_rules}, 'default', 'none: default');
is($s->{providers}{envp}{error_default}, undef, 'no default: null');

###########################################################################
# runtime wins; null removes

my $r = api('PATCH', '/api/resilience', { providers => {
    confp => { breaker => { open_threshold => 4 } },
    envp => { breaker => { open_threshold => 1 },
              cooldown => { retry_delay_ms => 30000,
                            rate_limit_reset_ms => 0 } } },
    global => { request_queue => { max_queue_depth => 5 },
                stream => { throughput_watchdog => JSON::PP::true } } });
is($r->{status}, 200, 'PATCH: 200');
is_deeply(vs($r->{json}, 'confp', 'breaker', 'open_threshold'),
          [4, 'runtime'], 'the answer is the new state: runtime wins');

# every worker sees it (connections land on either worker)
for my $i (1 .. 6) {
    $s = settings();
    is_deeply(vs($s, 'confp', 'breaker', 'open_threshold'), [4, 'runtime'],
              "GET $i: runtime value");
}

is_deeply(vs($s, 'confp', 'breaker', 'degrade_threshold'), [2, 'default'],
          'the derived degrade threshold follows (round(0.6 x 4))');
is_deeply(vs($s, 'envp', 'cooldown', 'retry_delay_ms'), [30000, 'runtime'],
          'retry delay set at runtime');
is_deeply(vs($s, 'envp', 'cooldown', 'rate_limit_reset_ms'),
          [undef, 'runtime'], '0 turns the environment default off');
is($s->{global}{request_queue}{max_queue_depth}, 5, 'global at runtime');
is($s->{global}{sources}{request_queue}{max_queue_depth}, 'runtime',
   'source runtime');
is($s->{global}{stream}{throughput_watchdog}, JSON::PP::true,
   'watchdog on at runtime');

# the request path uses the runtime value: one 503 opens envp's breaker
$r = $t->post($port, '/v1/chat/completions', { model => 'ec' });
is($r->{headers}{'x-omniroute-connection'}, 'b1', 'e1 failed over');
is(api('GET', '/api/monitoring/health')->{json}{providers}{envp}{state},
   'OPEN', 'open_threshold 1 (runtime) opened the breaker at once');

###########################################################################
# runtime rules and default

$r = api('PATCH', '/api/resilience', { providers => { envp => {
    error_rules => [{ status => 503, match => 'overloaded',
                      reason => 'rate_limit_exceeded', scope => 'model',
                      cooldown_ms => 60000 },
                    { id => 'nf', status => 404 }],
    error_default => { cooldown_ms => 120000, reason => 'server_error' } } } });
is($r->{status}, 200, 'rules PATCH: 200');
my $e = $r->{json}{providers}{envp};
is($e->{sources}{error_rules}, 'runtime', 'rules: runtime');
is_deeply($e->{error_rules}, [
    { id => 'operator-1', status => 503, match => 'overloaded',
      reason => 'rate_limit_exceeded', scope => 'model',
      cooldown_ms => 60000 },
    { id => 'nf', status => 404, match => '', reason => undef,
      scope => undef, cooldown_ms => undef }], 'rules as stored');
is_deeply($e->{error_default}, { cooldown_ms => 120000,
                                 scope => 'connection',
                                 reason => 'server_error' },
          'default as stored');
is($e->{sources}{error_default}, 'runtime', 'default: runtime');

$r = api('PATCH', '/api/resilience', { providers => { confp => {
    error_rules => [], error_default => { cooldown_ms => 0 } } } });
$c = $r->{json}{providers}{confp};
is_deeply($c->{error_rules}, [], 'an empty list replaces nginx.conf\'s rules');
is($c->{sources}{error_rules}, 'runtime', 'source runtime');
is($c->{error_default}, undef, 'cooldown_ms 0 turns the default off');
is($c->{sources}{error_default}, 'runtime', 'source runtime');

$r = api('PATCH', '/api/resilience', { providers => { confp => {
    error_rules => undef, error_default => undef } } });
$c = $r->{json}{providers}{confp};
is($c->{sources}{error_rules}, 'conf', 'null: nginx.conf\'s rules again');
is($c->{error_rules}[0]{id}, 'funds', 'the configured rule');
is($c->{sources}{error_default}, 'conf', 'null: the configured default');

# 50 rules in total at most, counting nginx.conf's
$r = api('PATCH', '/api/resilience', { providers => { oap => {
    error_rules => [map { +{ status => 429, match => "r$_" } } 1 .. 47] } } });
is($r->{status}, 200, '47 + 2 + 1 rules: accepted');
$r = api('PATCH', '/api/resilience', { providers => { beta => {
    error_rules => [{ status => 500 }, { status => 502 }] } } });
is($r->{status}, 400, 'two more would make 52: rejected');
like($r->{body}, qr/this would make 52/, 'naming the total');
$r = api('PATCH', '/api/resilience', { providers => { oap => {
    error_rules => undef } } });
is($r->{status}, 200, 'removed again');

###########################################################################
# reload: runtime values stay (the zone survives), env and conf reload

$t->reload;
sleep(0.5);

$s = settings();
is_deeply(vs($s, 'confp', 'breaker', 'open_threshold'), [4, 'runtime'],
          'after a reload the runtime value is still in force');
is_deeply(vs($s, 'envp', 'breaker', 'open_threshold'), [1, 'runtime'],
          'and the other one');
is($s->{global}{request_queue}{max_queue_depth}, 5, 'and the global one');
is($s->{providers}{envp}{sources}{error_rules}, 'runtime',
   'and the runtime rules');
is_deeply(vs($s, 'confp', 'cooldown', 'base_cooldown_ms'), [2000, 'conf'],
          'conf values as before');

$r = api('PATCH', '/api/resilience', {
    providers => { confp => { breaker => { open_threshold => undef } },
                   envp => { breaker => { open_threshold => undef },
                             cooldown => { retry_delay_ms => undef,
                                           rate_limit_reset_ms => undef },
                             error_rules => undef,
                             error_default => undef } },
    global => { request_queue => { max_queue_depth => undef },
                stream => { throughput_watchdog => undef } } });
is($r->{status}, 200, 'removing every override: 200');

$s = settings();
is_deeply(vs($s, 'confp', 'breaker', 'open_threshold'), [9, 'conf'],
          'null: the nginx.conf value again');
is_deeply(vs($s, 'envp', 'breaker', 'open_threshold'), [20, 'env'],
          'null: the environment value again');
is_deeply(vs($s, 'envp', 'cooldown', 'rate_limit_reset_ms'),
          [45000, 'env'], 'null: the environment default again');
is($s->{global}{request_queue}{max_queue_depth}, 77, 'global: env again');

$r = api('GET', '/metrics');
like($r->{body}, qr/^omniroute_zone_records\{table="settings"\} 0$/m,
     'no override record left in the zone');

like($t->error_log, qr/runtime settings of provider "confp" changed/,
     'changes are logged');

###########################################################################
# runtime rules are used by the classifier (R-CLASS-4)

{
    $r = api('PATCH', '/api/resilience', { providers => { confp => {
        error_rules => [{ status => 429, match => 'FUNDS',
                          reason => 'quota_exhausted',
                          cooldown_ms => 3 * 3600 * 1000 }] } } });

    $r = $t->post($port, '/v1/chat/completions', { model => 'cc' });

    $r = api('GET', '/api/resilience/cooldowns?provider=confp');
    my $x = $r->{json}{connections}[0];
    ok(defined $x->{retry_after_ms} && $x->{retry_after_ms} > 7200 * 1000,
       'the runtime rule (3 h) wins over the nginx.conf rule (2 h)');
}

$t->done;

done_testing;
