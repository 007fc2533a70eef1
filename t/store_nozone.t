#!/usr/bin/perl

# Without omniroute_zone the state lives in the built-in zone "omniroute"
# of 10m: nginx -t passes, failures open the breaker for both workers,
# health and metrics say so, runtime settings can be set, a reload keeps
# the state.  omniroute_redis still requires a declared zone; a zone named
# "omniroute" of another module is a configuration error.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP;
use Time::HiRes qw(sleep);
use OmniTest;
use OmniStore qw(chat api metric);

my $t = OmniTest->new;
my $m = $t->mock('p');

my $TOKEN = 'adm-0123456789-abcdefghij';
$ENV{OMNI_TEST_API_TOKEN} = $TOKEN;

$t->write_file('key-b1', "sk-b1~status=503\n");
$t->write_file('key-g1', "sk-g1\n");

###########################################################################
# nginx -t

$t->config(<<'EOF');
    omniroute_redis 127.0.0.1:6379;
    %%GATEWAY%%
EOF
my ($rc, $out) = $t->test_config;
isnt($rc, 0, 'omniroute_redis without omniroute_zone is rejected');
like($out, qr/"omniroute_redis" requires "omniroute_zone"/,
     'naming omniroute_zone');

$t->config(<<'EOF');
    limit_req_zone $binary_remote_addr zone=omniroute:1m rate=1r/s;
    omniroute_provider p url=http://127.0.0.1:%%PORT_mock_p%%/p;
    %%GATEWAY%%
EOF
($rc, $out) = $t->test_config;
isnt($rc, 0, 'another module\'s zone "omniroute" and no omniroute_zone');
like($out, qr/shared memory zone "omniroute" is already declared/,
     'is a conflict with the built-in zone');

$t->config(<<'EOF');
    limit_req_zone $binary_remote_addr zone=omniroute:1m rate=1r/s;
    omniroute_zone zone=gateway:1m;
    omniroute_provider p url=http://127.0.0.1:%%PORT_mock_p%%/p;
    %%GATEWAY%%
EOF
($rc, $out) = $t->test_config;
is($rc, 0, 'solved by declaring omniroute_zone') or diag($out);

$t->config(<<"EOF");
    omniroute_provider brk url=http://127.0.0.1:%%PORT_mock_p%%/brk
                       kind=local cooldown_base=1ms cooldown_max=5ms
                       breaker_reset=10m;
    omniroute_provider good url=http://127.0.0.1:%%PORT_mock_p%%/good;
    omniroute_connection b1 provider=brk key_file=%%TESTDIR%%/key-b1;
    omniroute_connection g1 provider=good key_file=%%TESTDIR%%/key-g1;

    omniroute_api_token env=OMNI_TEST_API_TOKEN;

${\ OmniStore::gateway_server(
    v1 => ['omniroute_max_attempts 1'])}
EOF

($rc, $out) = $t->test_config;
is($rc, 0, 'nginx -t passes without omniroute_zone') or diag($out);
unlike($out, qr/\[(warn|emerg|alert)\]/, 'and says nothing about it');

$t->run($t->port('gw'));
my $gw = $t->port('gw');
OmniStore::node($t, $TOKEN);

is(metric('omniroute_zone_size_bytes'), 10 << 20,
   'the built-in zone of 10m');
is(api('GET', '/api/monitoring/health')->{json}{status}, 'ok',
   'health: ok');

###########################################################################
# failures open the breaker, for both workers

for (1 .. 6) {
    chat('brk/m');
    sleep(0.02);
}

my $h = api('GET', '/api/monitoring/health')->{json};
is($h->{providers}{brk}{state}, 'OPEN', 'six 503s opened the breaker');
is($h->{status}, 'degraded', 'health: degraded');
ok(scalar @{$m->requests} <= 3, 'the provider was not asked after it opened ('
   . scalar @{$m->requests} . ' requests)');

my %reason = map {
    my $doc = OmniTest::json(chat('brk/m'));
    (($doc && $doc->{diagnostics}{excluded}[0]{reason}) // 'none') => 1
} 1 .. 6;
is_deeply([keys %reason], ['circuit_open'],
          'both workers skip the provider: circuit_open');

is(chat('good/m')->{status}, 200, 'another provider still serves');

my $r = api('PATCH', '/api/resilience',
            { providers => { good => { breaker => {
                                 open_threshold => 5 } } } });
is($r->{status}, 200, 'runtime settings can be set');

###########################################################################
# a reload adopts the built-in zone

$t->reload;
sleep(0.5);

$h = api('GET', '/api/monitoring/health')->{json};
is($h->{providers}{brk}{state}, 'OPEN', 'the breaker is still OPEN');
is(api('GET', '/api/resilience')->{json}{providers}{good}{breaker}
       {open_threshold}, 5, 'the runtime setting stays');

$t->done;
done_testing;
