#!/usr/bin/perl

# GET /metrics (SPEC §12): Prometheus text format, checked by a strict
# parser here and by `promtool check metrics` (Debian package prometheus)
# when it is installed; the values follow traffic: requests by outcome,
# attempts and fallbacks by reason, restatements by rule, breaker state
# per provider, connections by state, active lockouts, zone usage.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP;
use Time::HiRes qw(sleep);
use OmniTest;
use PromText;

my $t = OmniTest->new;
my $m = $t->mock('p');

my $TOKEN = 'metrics-0123456789-abcdef';

$ENV{OMNI_TEST_API_TOKEN} = $TOKEN;
$t->write_file('key-a1', "sk-a1~status=503\n");
$t->write_file('key-r1',
               "sk-r1~status=403,body=%E7%94%A8%E6%88%B7%E9%A2%9D%E5%BA%A6"
               . "%E4%B8%8D%E8%B6%B3\n");
$t->write_file('key-d1', "sk-d1~status=429\n");
$t->write_file('key-b1', "sk-b1\n");

$t->config(<<'EOF');
    omniroute_zone zone=omniroute:1m;

    omniroute_provider alpha url=http://127.0.0.1:%%PORT_mock_p%%/alpha
                       kind=local;
    omniroute_provider ar url=http://127.0.0.1:%%PORT_mock_p%%/ar
                       catalog=agentrouter;
    omniroute_provider delta url=http://127.0.0.1:%%PORT_mock_p%%/delta
                       lockout=on;
    omniroute_provider beta url=http://127.0.0.1:%%PORT_mock_p%%/beta;

    omniroute_connection a1 provider=alpha key_file=%%TESTDIR%%/key-a1;
    omniroute_connection r1 provider=ar key_file=%%TESTDIR%%/key-r1;
    omniroute_connection d1 provider=delta key_file=%%TESTDIR%%/key-d1;
    omniroute_connection b1 provider=beta key_file=%%TESTDIR%%/key-b1;

    omniroute_combo smart alpha/m1 beta/m2;
    omniroute_combo quota ar/m1 beta/m2;
    omniroute_combo lock delta/gpt-5 beta/m2;

    server {
        listen 127.0.0.1:%%PORT_gw%%;

        location /v1/ {
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

my $port = $t->port('gw');

sub metrics {
    my $r = $t->get($port, '/metrics', Authorization => "Bearer $TOKEN");
    return $r;
}

sub check_format {
    my ($text, $name) = @_;
    return PromText::check($t, $text, $name);
}

my $r = $t->get($port, '/metrics');
is($r->{status}, 401, 'metrics need the token');

$r = metrics();
is($r->{status}, 200, 'metrics: 200');
like($r->{headers}{'content-type'}, qr{^text/plain; version=0\.0\.4},
     'Prometheus text content type');

my $s = check_format($r->{body}, 'fresh');

is($s->{'omniroute_requests_total{outcome="success"}'}, 0,
   'no request yet');
is($s->{'omniroute_breaker_state{provider="alpha",state="CLOSED"}'}, 1,
   'alpha CLOSED');
is($s->{'omniroute_breaker_state{provider="alpha",state="OPEN"}'}, 0,
   'alpha not OPEN');
ok($s->{'omniroute_zone_size_bytes'} >= 1024 * 1024, 'zone size');
ok($s->{'omniroute_zone_used_bytes'} > 0, 'zone usage');
is($s->{'omniroute_redis_link_state{state="disabled"}'}, 1,
   'no omniroute_redis: link state disabled');
ok(!exists $s->{'omniroute_redis_published_total'},
   'and no Redis counters');

# traffic: two 503s open alpha's breaker, a restated agentrouter 403, a
# model lockout on delta
$t->post($port, '/v1/chat/completions', { model => 'smart' });
sleep(1.2);
$t->post($port, '/v1/chat/completions', { model => 'smart' });
$t->post($port, '/v1/chat/completions', { model => 'smart' });
$r = $t->post($port, '/v1/chat/completions', { model => 'quota' });
is($r->{status}, 200, 'the quota combo fell over to beta');
$t->post($port, '/v1/chat/completions', { model => 'lock' });
$t->post($port, '/v1/chat/completions', {});

$r = metrics();
$s = check_format($r->{body}, 'after traffic');

is($s->{'omniroute_requests_total{outcome="success"}'}, 5,
   'five requests succeeded');
is($s->{'omniroute_requests_total{outcome="client_error"}'}, 1,
   'one client error (no model)');
is($s->{'omniroute_attempts_total{reason="server_error"}'}, 2,
   'two server errors');
is($s->{'omniroute_fallbacks_total{reason="server_error"}'}, 2,
   'two fallbacks after a server error');
is($s->{'omniroute_attempts_total{reason="none"}'}, 5,
   'five successful attempts');
is($s->{'omniroute_fallbacks_total{reason="quota_exhausted"}'}
   + $s->{'omniroute_fallbacks_total{reason="rate_limit_exceeded"}'}, 2,
   'the restated 403 and the 429 fell over');
my ($rest) = grep { /^omniroute_restatements_total\{/ } keys %$s;
ok($rest, "a restatement counted ($rest)");
is($s->{$rest}, 1, 'once') if $rest;
is($s->{'omniroute_breaker_state{provider="alpha",state="OPEN"}'}, 1,
   'alpha OPEN');
is($s->{'omniroute_breaker_state{provider="alpha",state="CLOSED"}'}, 0,
   'alpha not CLOSED');
is($s->{'omniroute_breaker_failures{provider="alpha"}'}, 2,
   'alpha counts two failures');
ok($s->{'omniroute_breaker_retry_after_seconds{provider="alpha"}'} > 10,
   'alpha retry-after in seconds');
is($s->{'omniroute_breaker_state{provider="beta",state="CLOSED"}'}, 1,
   'beta CLOSED');
is($s->{'omniroute_connections{provider="ar",state="cooldown"}'}, 1,
   'r1 cooling down after the quota error');
is($s->{'omniroute_lockouts_active{provider="delta"}'}, 1,
   'delta has a model lockout');
is($s->{'omniroute_zone_records{table="breaker"}'}, 1,
   'one breaker record');
is($s->{'omniroute_zone_records{table="lockout"}'}, 1,
   'one lockout record');

# every provider has all four state series
for my $p (qw(alpha ar delta beta)) {
    my $sum = 0;
    $sum += $s->{"omniroute_breaker_state{provider=\"$p\",state=\"$_\"}"}
        // 0 for qw(CLOSED DEGRADED OPEN HALF_OPEN);
    is($sum, 1, "$p: exactly one breaker state is 1");
}

$t->done;

done_testing;
