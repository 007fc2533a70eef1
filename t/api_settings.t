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
$ENV{OMNIROUTE_CIRCUIT_BREAKER_MAX_BACKOFF_MULTIPLIER} = '5000';
$ENV{OMNIROUTE_CIRCUIT_BREAKER_OAUTH_DEGRADATION_THRESHOLD} = '10';

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
    omniroute_provider degp url=http://127.0.0.1:%%PORT_mock_p%%/degp
                       breaker_degrade=5;

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

# the environment goes through the bounds of nginx.conf and PATCH
is_deeply(vs($s, 'envp', 'breaker', 'max_backoff_multiplier'), [1024, 'env'],
          'OMNIROUTE_CIRCUIT_BREAKER_MAX_BACKOFF_MULTIPLIER=5000: 1024 as '
          . 'for nginx.conf and PATCH');
like($t->error_log, qr/environment variable OMNIROUTE_CIRCUIT_BREAKER_MAX_BACKOFF_MULTIPLIER is out of range \(1\.\.1024\), clamped to 1024/,
     'the clamp is logged with the range');

# a contradiction between the environment and a default: logged, clamped
is_deeply(vs($s, 'oap', 'breaker', 'degrade_threshold'), [8, 'env'],
          'an oauth degrade threshold of 10 above the open threshold 8 is '
          . 'lowered');
like($t->error_log, qr/provider "oap": OMNIROUTE_CIRCUIT_BREAKER_OAUTH_DEGRADATION_THRESHOLD=10 conflicts with breaker_failures=8 \(the oauth default\): the degrade threshold must not exceed the open threshold/,
     'and the contradiction is logged, naming both');

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

###########################################################################
# the rules between settings are nginx.conf's: a PATCH that contradicts
# them is refused as a whole

$s = settings();

$r = api('PATCH', '/api/resilience', { providers => {
    envp => { breaker => { open_threshold => 3 } },
    confp => { breaker => { degrade_threshold => 10 } } } });
is($r->{status}, 400, 'degrade 10 above the configured open threshold 9');
is($r->{json}{error}{code}, 'invalid_settings', 'invalid_settings');
like($r->{json}{error}{message}, qr/^provider "confp": breaker\.degrade_threshold 10 conflicts with breaker\.open_threshold 9: the degrade threshold must not exceed the open threshold \(it would be 9\)$/,
     'naming both values and the rule');

$r = api('PATCH', '/api/resilience', { providers => {
    degp => { breaker => { open_threshold => 4 } } } });
is($r->{status}, 400, 'open 4 below the configured degrade threshold 5');
like($r->{json}{error}{message}, qr/breaker\.open_threshold 4 conflicts with breaker\.degrade_threshold 5: the degrade threshold must not exceed/,
     'the field of the PATCH is named first');

is_deeply(settings(), $s, 'nothing changed');

###########################################################################
# every setting with an nginx.conf parameter has the same range in
# nginx.conf and in PATCH (below, at and above each bound)

my $D = 86400 * 1000;

# [nginx.conf with %s, group, member, min, max, unit, conf and API extras
#  that keep the rules between settings out of the way]
my @bounds = (
    [ 'breaker_failures=%s', 'breaker', 'open_threshold', 1, 100000 ],
    [ 'breaker_degrade=%s', 'breaker', 'degrade_threshold', 1, 100000, '',
      'breaker_failures=100000', { open_threshold => 100000 } ],
    [ 'breaker_reset=%s', 'breaker', 'reset_timeout_ms', 1, 30 * $D,
      'ms' ],
    [ 'breaker_max_multiplier=%s', 'breaker', 'max_backoff_multiplier', 1,
      1024 ],
    [ 'cooldown_base=%s', 'cooldown', 'base_cooldown_ms', 1, 30 * $D, 'ms',
      'cooldown_max=30d', { max_cooldown_ms => 30 * $D } ],
    [ 'cooldown_max=%s', 'cooldown', 'max_cooldown_ms', 1, 30 * $D, 'ms',
      'cooldown_base=1ms', { base_cooldown_ms => 1 } ],
    [ 'retry_delay=%s', 'cooldown', 'retry_delay_ms', 1000, 21600 * 1000,
      'ms' ],
    [ 'lockout:base=%s', 'model_lockout', 'base_cooldown_ms', 1, 30 * $D,
      'ms', 'max=30d', { max_cooldown_ms => 30 * $D } ],
    [ 'lockout:max=%s', 'model_lockout', 'max_cooldown_ms', 1, 30 * $D,
      'ms', 'base=1ms', { base_cooldown_ms => 1 } ],
    [ 'lockout:steps=%s', 'model_lockout', 'max_backoff_steps', 0, 30 ],
);

my $bserver = <<'EOF';
    server {
        listen 127.0.0.1:%%PORT_gw%%;
        location /v1/ { omniroute_pass; }
        location /_omniroute { internal; include %%PARAMS%%; }
    }
EOF

for my $b (@bounds) {
    my ($fmt, $grp, $mem, $min, $max, $unit, $cextra, $aextra) = @$b;
    $unit //= '';

    for my $case ([$min - 1, 0], [$min, 1], [$max, 1], [$max + 1, 0]) {
        my ($v, $ok) = @$case;
        my $param = sprintf($fmt, "$v$unit");
        my $http;

        if ($param =~ s/^lockout://) {
            $http = "    omniroute_model_lockout on $param"
                    . ($cextra ? " $cextra" : '') . ";\n"
                    . "    omniroute_provider p url=http://127.0.0.1:1/p;\n";
        } else {
            $http = "    omniroute_provider p url=http://127.0.0.1:1/p "
                    . $param . ($cextra ? " $cextra" : '') . ";\n";
        }

        $t->config($http . $bserver);
        my ($rc, $out) = $t->test_config;
        (my $pname = $param) =~ s/=.*//;

        if ($ok) {
            is($rc, 0, "nginx.conf $param: accepted") or diag($out);
        } else {
            isnt($rc, 0, "nginx.conf $param: nginx -t fails");
            like($out, qr/invalid value "\Q$v$unit\E" of "$pname" .*: must be between/,
                 "nginx.conf $param: out of range") or diag($out);
        }

        $r = api('PATCH', '/api/resilience', { providers => { beta => {
            $grp => { $mem => $v, %{$aextra || {}} } } } });

        if ($ok) {
            is($r->{status}, 200, "PATCH $grp.$mem $v: accepted")
                or diag($r->{body});
        } else {
            is($r->{status}, 400, "PATCH $grp.$mem $v: 400");
            is($r->{json}{error}{code}, 'out_of_range',
               "PATCH $grp.$mem $v: out_of_range");
        }

        api('PATCH', '/api/resilience', { providers => { beta => {
            $grp => { $mem => undef,
                      map { $_ => undef } keys %{$aextra || {}} } } } });
    }
}

is_deeply(vs(settings(), 'beta', 'breaker', 'open_threshold'),
          [20, 'env'], 'beta as it was');

###########################################################################
# a full zone: a PATCH that finds no room changes nothing (all or nothing)

$t->config("    omniroute_zone zone=omniroute:32k;\n"
           . join('', map { "    omniroute_provider z$_ "
                            . "url=http://127.0.0.1:1/z$_;\n" } 1 .. 16)
           . <<'EOF');
    server {
        listen 127.0.0.1:%%PORT_gw%%;
        location / {
            omniroute_api;
            omniroute_api_token env=OMNI_TEST_API_TOKEN;
        }
    }
EOF
$t->restart($port);

# fill the zone with settings records (never evicted) until one is refused
my $full;

for my $i (1 .. 16) {
    $r = api('PATCH', '/api/resilience', { providers => {
        "z$i" => { breaker => { open_threshold => 5 } } } });

    if ($r->{status} != 200) {
        $full = $i;
        last;
    }
}

ok($full && $full > 2 && $full < 16, 'the zone is full after a few records')
    or diag("full at " . ($full // 'never'));
is($r->{status}, 507, 'then 507');
is($r->{json}{error}{code}, 'zone_full', 'zone_full');
like($t->error_log, qr/\[alert\].*could not allocate settings record/,
     'the refused settings record is logged at alert');
$t->{allow_log} = qr/could not allocate settings record/;

$s = settings();
is_deeply(vs($s, "z$full", 'breaker', 'open_threshold'), [20, 'env'],
          'the refused provider kept its settings');

# existing records first, then new ones: z1 and z2 must not change
$r = api('PATCH', '/api/resilience', { providers => {
    z1 => { breaker => { open_threshold => 6 } },
    z2 => { breaker => { open_threshold => 6 },
            cooldown => { retry_delay_ms => 5000 } },
    "z$full" => { breaker => { open_threshold => 6 } },
    'z' . ($full + 1) => { breaker => { open_threshold => 6 } } },
    global => { request_queue => { max_queue_depth => 9 } } });
is($r->{status}, 507, 'a PATCH of existing and new records: 507');
like($r->{json}{error}{message}, qr/nothing was changed/, 'saying so');
is_deeply(settings(), $s, 'nothing changed: not z1, z2, nor the others');

like(api('GET', '/metrics')->{body},
     qr/^omniroute_zone_records\{table="settings"\} @{[$full - 1]}$/m,
     'no record was left behind');

# changes of existing records need no room
$r = api('PATCH', '/api/resilience', { providers => {
    z1 => { breaker => { open_threshold => 7 } },
    z2 => { breaker => { open_threshold => 7 } } } });
is($r->{status}, 200, 'existing records only: 200');
is_deeply(vs($r->{json}, 'z2', 'breaker', 'open_threshold'), [7, 'runtime'],
          'changed');

# removing overrides makes room again
$r = api('PATCH', '/api/resilience', { providers => {
    z1 => { breaker => { open_threshold => undef } } } });
is($r->{status}, 200, 'an override removed');
$r = api('PATCH', '/api/resilience', { providers => {
    "z$full" => { breaker => { open_threshold => 6 } } } });
is($r->{status}, 200, 'the refused provider fits now');

$t->done;

done_testing;

