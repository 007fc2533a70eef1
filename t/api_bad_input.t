#!/usr/bin/perl

# R-API bad input (SPEC §12): every write endpoint answers malformed JSON,
# wrong types, out-of-range values, unknown fields, unknown providers or
# connections, oversized bodies and wrong methods with a 4xx JSON error
# naming the problem, and changes nothing (the whole state is compared
# before and after).

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

$ENV{OMNI_TEST_API_TOKEN} = $TOKEN;
$t->write_file('key-a1', "sk-a1~status=503\n");
$t->write_file('key-g2', "sk-g2~status=429\n");
$t->write_file('key-d1', "sk-d1~status=429\n");
$t->write_file('key-b1', "sk-b1\n");

$t->config(<<'EOF');
    omniroute_zone zone=omniroute:1m;

    omniroute_provider alpha url=http://127.0.0.1:%%PORT_mock_p%%/alpha
                       kind=local;
    omniroute_provider gamma url=http://127.0.0.1:%%PORT_mock_p%%/gamma;
    omniroute_provider delta url=http://127.0.0.1:%%PORT_mock_p%%/delta;
    omniroute_provider beta  url=http://127.0.0.1:%%PORT_mock_p%%/beta;

    omniroute_connection a1 provider=alpha key_file=%%TESTDIR%%/key-a1;
    omniroute_connection g2 provider=gamma key_file=%%TESTDIR%%/key-g2;
    omniroute_connection d1 provider=delta key_file=%%TESTDIR%%/key-d1;
    omniroute_connection b1 provider=beta key_file=%%TESTDIR%%/key-b1;

    omniroute_combo smart alpha/m1 gamma/m1 delta/gpt-5-mini beta/m2;

    server {
        listen 127.0.0.1:%%PORT_gw%%;

        location /v1/ {
            omniroute_pass;
            omniroute_max_attempts 4;
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
    my ($method, $path, $body, %h) = @_;

    $h{Authorization} = "Bearer $TOKEN";

    if (defined $body) {
        $body = encode_json($body) if ref $body;
        $h{'Content-Type'} //= 'application/json';
    }

    my $r = $t->http($port, OmniTest::request_text($method, $path, $body,
                                                   %h));
    $r->{json} = eval { decode_json($r->{body}) };
    return $r;
}

# everything an endpoint could change, without times that move by
# themselves
sub snapshot {
    my %s;

    my $h = api('GET', '/api/monitoring/health')->{json};
    for my $p (sort keys %{$h->{providers}}) {
        my $b = $h->{providers}{$p};
        $s{health}{$p} = [$b->{state}, $b->{failures}, $b->{open_until}];
    }

    my $c = api('GET', '/api/resilience/cooldowns')->{json};
    for my $x (@{$c->{connections}}) {
        $s{conn}{$x->{id}} = [$x->{status}, $x->{until}, $x->{backoff_level},
                              $x->{failures}, $x->{terminal}];
    }

    my $l = api('GET', '/api/resilience/model-cooldowns')->{json};
    $s{lockouts} = [map { [$_->{provider}, $_->{connection}, $_->{model},
                           $_->{expires_at}] } @{$l->{lockouts}}];

    $s{settings} = api('GET', '/api/resilience')->{json};

    return JSON::PP->new->canonical->encode(\%s);
}

# the state under test: gamma's cooldown made long at runtime, alpha's
# breaker DEGRADED, g2 cooling down, d1's model locked out
my $r = api('PATCH', '/api/resilience', { providers => {
    gamma => { cooldown => { base_cooldown_ms => 600000 } },
    delta => { model_lockout => { enabled => JSON::PP::true } } } });
is($r->{status}, 200, 'setup: runtime settings');

$r = $t->post($port, '/v1/chat/completions', { model => 'smart' });
is($r->{headers}{'x-omniroute-connection'}, 'b1', 'setup: traffic');

my $before = snapshot();
my $s = decode_json($before);
is($s->{health}{alpha}[0], 'DEGRADED', 'setup: alpha DEGRADED');
is($s->{conn}{g2}[0], 'cooldown', 'setup: g2 cooling down');
is(scalar @{$s->{lockouts}}, 1, 'setup: d1 locked out');

sub bad {
    my ($method, $path, $body, $status, $code, $msg, $name) = @_;

    my $r = api($method, $path, $body);

    is($r->{status}, $status, "$name: $status");
    is($r->{json}{error}{code}, $code, "$name: code $code")
        or diag($r->{body});
    like($r->{json}{error}{message} // '', $msg, "$name: message")
        if $msg;
    like($r->{headers}{'content-type'} // '', qr{^application/json},
         "$name: JSON");
}

my $big = '{"provider":"' . ('x' x 70000) . '"}';

my @endpoints = (
    [ 'POST', '/api/resilience/reset' ],
    [ 'POST', '/api/resilience/cooldowns' ],
    [ 'POST', '/api/resilience/terminal-reset' ],
    [ 'DELETE', '/api/resilience/model-cooldowns' ],
    [ 'PATCH', '/api/resilience' ],
);

# common to every write endpoint
for my $e (@endpoints) {
    my ($method, $path) = @$e;
    my $n = "$method $path";

    bad($method, $path, '{"provider":', 400, 'invalid_json',
        qr/malformed JSON at line 1/, "$n malformed JSON");
    bad($method, $path, '[1,2]', 400, 'invalid_json', qr/JSON object/,
        "$n array body");
    bad($method, $path, '{"a":1,"a":2}', 400, 'invalid_json',
        qr/duplicate/, "$n duplicate key");
    bad($method, $path, '{"provider":"alpha"} x', 400, 'invalid_json',
        qr/end of file expected/, "$n trailing garbage");
    bad($method, $path, { bogus => 1 }, 400, 'unknown_field',
        qr/"bogus"/, "$n unknown field");
    bad($method, $path, $big, 413, 'body_too_large',
        qr/omniroute_api_max_body_size/, "$n oversized body");

    # the same, chunked (no Content-Length to check up front)
    my $chunked = '';
    for (my $i = 0; $i < length $big; $i += 8192) {
        my $part = substr($big, $i, 8192);
        $chunked .= sprintf("%x\r\n%s\r\n", length $part, $part);
    }
    $chunked .= "0\r\n\r\n";

    my $r = $t->http($port, OmniTest::request_text($method, $path, $chunked,
        Authorization => "Bearer $TOKEN",
        'Transfer-Encoding' => 'chunked'));
    is($r->{status}, 413, "$n oversized chunked body: 413");
    like($r->{body}, qr/"body_too_large"/, "$n chunked: JSON error");

    $r = api('PUT', $path, '{}');
    is($r->{status}, 405, "$n: PUT is 405");
    is(decode_json($r->{body})->{error}{code}, 'method_not_allowed',
       "$n: PUT names the problem");
}

# wrong method per endpoint
for my $e (['GET', '/api/resilience/reset'],
           ['GET', '/api/resilience/terminal-reset'],
           ['POST', '/api/resilience/model-cooldowns'],
           ['POST', '/api/resilience'],
           ['DELETE', '/api/resilience/cooldowns'],
           ['PATCH', '/api/monitoring/health'],
           ['POST', '/metrics'],
           ['POST', '/status'])
{
    bad($e->[0], $e->[1], $e->[0] eq 'GET' ? undef : '{}', 405,
        'method_not_allowed', undef, "$e->[0] $e->[1]");
}

# POST /api/resilience/reset
bad('POST', '/api/resilience/reset', { provider => 5 }, 400, 'invalid_type',
    qr/"provider" must be a string/, 'reset: provider not a string');
bad('POST', '/api/resilience/reset', { provider => undef }, 400,
    'invalid_type', qr/"provider"/, 'reset: provider null');
bad('POST', '/api/resilience/reset', { provider => 'nope' }, 404,
    'unknown_provider', qr/unknown provider "nope"/, 'reset: unknown');

# POST /api/resilience/cooldowns
my $cd = '/api/resilience/cooldowns';
bad('POST', $cd, undef, 400, 'missing_body', qr/connectionIds/,
    'cooldowns: no body');
bad('POST', $cd, {}, 400, 'invalid_request', qr/connectionIds/,
    'cooldowns: empty object');
bad('POST', $cd, { connectionIds => 'g2' }, 400, 'invalid_type',
    qr/non-empty array/, 'cooldowns: ids not an array');
bad('POST', $cd, { connectionIds => [] }, 400, 'invalid_type',
    qr/non-empty array/, 'cooldowns: empty ids');
bad('POST', $cd, { connectionIds => ['g2', 7] }, 400, 'invalid_type',
    qr/connection ids/, 'cooldowns: an id not a string');
bad('POST', $cd, { connectionIds => ['g2', 'nope'] }, 404,
    'unknown_connection', qr/unknown connection "nope"/,
    'cooldowns: one unknown id (g2 stays cooling down)');
bad('POST', $cd, { all => JSON::PP::false }, 400, 'invalid_type',
    qr/"all" must be true/, 'cooldowns: all false');
bad('POST', $cd, { all => 'yes' }, 400, 'invalid_type',
    qr/"all" must be true/, 'cooldowns: all a string');
bad('POST', $cd, { all => JSON::PP::true, provider => 'nope' }, 404,
    'unknown_provider', qr/"nope"/, 'cooldowns: all, unknown provider');
bad('POST', $cd, { all => JSON::PP::true, provider => [] }, 400,
    'invalid_type', qr/"provider"/, 'cooldowns: provider not a string');
bad('POST', $cd, { connectionIds => ['g2'], all => JSON::PP::true }, 400,
    'invalid_request', qr/not both/, 'cooldowns: ids and all');
bad('POST', $cd, { connectionIds => ['g2'], provider => 'gamma' }, 400,
    'invalid_request', qr/"provider" goes with "all"/,
    'cooldowns: ids and provider');

# POST /api/resilience/terminal-reset
my $tr = '/api/resilience/terminal-reset';
bad('POST', $tr, undef, 400, 'missing_body', qr/connectionId/,
    'terminal: no body');
bad('POST', $tr, {}, 400, 'missing_field', qr/"connectionId" is required/,
    'terminal: no id');
bad('POST', $tr, { connectionId => ['g2'] }, 400, 'invalid_type',
    qr/connection id/, 'terminal: id not a string');
bad('POST', $tr, { connectionId => 'nope' }, 404, 'unknown_connection',
    qr/"nope"/, 'terminal: unknown id');
bad('POST', $tr, { connectionIds => ['g2'] }, 400, 'unknown_field',
    qr/"connectionIds"/, 'terminal: plural field');

# DELETE /api/resilience/model-cooldowns
my $mc = '/api/resilience/model-cooldowns';
my %lo = (provider => 'delta', connection => 'd1', model => 'gpt-5-mini');
bad('DELETE', $mc, undef, 400, 'missing_body', qr/"model"/,
    'model cooldowns: no body');
bad('DELETE', $mc, { %lo, model => undef }, 400, 'invalid_type',
    qr/"model" must be a non-empty string/, 'model cooldowns: model null');
delete local $lo{model};
bad('DELETE', $mc, { %lo }, 400, 'missing_field', qr/are required/,
    'model cooldowns: no model');
$lo{model} = 'gpt-5-mini';
bad('DELETE', $mc, { %lo, model => '' }, 400, 'invalid_type',
    qr/non-empty/, 'model cooldowns: empty model');
bad('DELETE', $mc, { %lo, model => 'm' x 201 }, 400, 'invalid_type',
    qr/at most 200 bytes/, 'model cooldowns: model too long');
bad('DELETE', $mc, { %lo, model => 42 }, 400, 'invalid_type', qr/"model"/,
    'model cooldowns: model a number');
bad('DELETE', $mc, { %lo, provider => 'nope' }, 404, 'unknown_provider',
    qr/"nope"/, 'model cooldowns: unknown provider');
bad('DELETE', $mc, { %lo, connection => 'nope' }, 404,
    'unknown_connection', qr/"nope"/, 'model cooldowns: unknown connection');
bad('DELETE', $mc, { %lo, connection => 'g2' }, 400, 'invalid_request',
    qr/"g2" is not a connection of provider "delta"/,
    'model cooldowns: connection of another provider');
bad('DELETE', $mc, { %lo, provider => 1 }, 400, 'invalid_type',
    qr/"provider" must be a string/, 'model cooldowns: provider a number');

# PATCH /api/resilience: each bad document also carries a valid change
# (open_threshold 5 of beta) that must not be applied
my $rs = '/api/resilience';
my $ok = { breaker => { open_threshold => 5 } };

sub patch_bad {
    my ($doc, $status, $code, $msg, $name) = @_;
    $doc->{providers}{beta} //= $ok
        if ref($doc->{providers} // {}) eq 'HASH';
    bad('PATCH', $rs, $doc, $status, $code, $msg, "settings: $name");
}

bad('PATCH', $rs, undef, 400, 'missing_body', qr/providers/,
    'settings: no body');
patch_bad({ providers => [] }, 400, 'invalid_type',
          qr/"providers" must be an object/, 'providers an array');
patch_bad({ providers => { nope => {} } }, 404, 'unknown_provider',
          qr/unknown provider "nope"/, 'unknown provider');
patch_bad({ providers => { alpha => 3 } }, 400, 'invalid_type',
          qr/providers\.alpha" must be an object/, 'provider not an object');
patch_bad({ providers => { alpha => { breakers => {} } } }, 400,
          'unknown_field', qr/unknown field "breakers" in providers\.alpha/,
          'unknown group');
patch_bad({ providers => { alpha => { breaker => { open => 3 } } } }, 400,
          'unknown_field', qr/"open" in providers\.alpha\.breaker/,
          'unknown setting');
patch_bad({ providers => { alpha => { breaker => [] } } }, 400,
          'invalid_type', qr/breaker" must be an object/, 'group an array');
patch_bad({ providers => { alpha => { breaker => {
              open_threshold => '3' } } } }, 400, 'invalid_type',
          qr/open_threshold must be an integer/, 'string for an integer');
patch_bad({ providers => { alpha => { breaker => {
              open_threshold => 2.5 } } } }, 400, 'invalid_type',
          qr/open_threshold must be an integer/, 'real for an integer');
patch_bad({ providers => { alpha => { breaker => {
              open_threshold => 0 } } } }, 400, 'out_of_range',
          qr/open_threshold: 0 is out of range \(1\.\.100000\)/,
          'open_threshold 0');
patch_bad({ providers => { alpha => { breaker => {
              max_backoff_multiplier => 2000 } } } }, 400, 'out_of_range',
          qr/max_backoff_multiplier: 2000 is out of range/,
          'multiplier 2000');
patch_bad({ providers => { alpha => { breaker => {
              degrade_threshold => 3 } } } }, 400, 'invalid_settings',
          qr/provider "alpha": breaker\.degrade_threshold 3 conflicts .* \(it would be 2\)/,
          'degrade above open (2)');
patch_bad({ providers => { alpha => { breaker => {
              provider_cooldown_enabled => 1 } } } }, 400, 'invalid_type',
          qr/provider_cooldown_enabled must be true or false/,
          'integer for a boolean');
patch_bad({ providers => { alpha => { cooldown => {
              retry_delay_ms => 500 } } } }, 400, 'out_of_range',
          qr/retry_delay_ms: 500 is out of range \(1000\.\.21600000, or 0/,
          'retry delay under 1 s');
patch_bad({ providers => { alpha => { cooldown => {
              retry_delay_ms => 21600001 } } } }, 400, 'out_of_range',
          qr/retry_delay_ms/, 'retry delay over 6 h');
patch_bad({ providers => { alpha => { cooldown => {
              base_cooldown_ms => 5000, max_cooldown_ms => 4000 } } } },
          400, 'invalid_settings',
          qr/cooldown max must be at least the base/, 'cooldown max < base');
patch_bad({ providers => { alpha => { cooldown => {
              max_cooldown_ms => 31 * 86400 * 1000 } } } }, 400,
          'out_of_range', qr/max_cooldown_ms/, 'cooldown over 30 days');
patch_bad({ providers => { alpha => { model_lockout => {
              base_cooldown_ms => 3600000 } } } }, 400, 'invalid_settings',
          qr/lockout max_cooldown must be at least base_cooldown/,
          'lockout base above the configured max (R-ML-3)');
patch_bad({ providers => { alpha => { model_lockout => {
              error_codes => [429, 99] } } } }, 400, 'out_of_range',
          qr/99 is not an HTTP status/, 'error code 99');
patch_bad({ providers => { alpha => { model_lockout => {
              error_codes => [429, 429] } } } }, 400, 'invalid_value',
          qr/429 is listed twice/, 'error code twice');
patch_bad({ providers => { alpha => { model_lockout => {
              error_codes => '429' } } } }, 400, 'invalid_type',
          qr/error_codes must be an array/, 'error codes a string');
patch_bad({ providers => { alpha => { model_lockout => {
              error_codes => [(400 .. 416)] } } } }, 400, 'invalid_type',
          qr/at most 16/, '17 error codes');
patch_bad({ providers => { alpha => { error_rules => {} } } }, 400,
          'invalid_type', qr/error_rules must be an array/,
          'rules an object');
patch_bad({ providers => { alpha => { error_rules => [{}] } } }, 400,
          'invalid_rule', qr/error_rules\[0\]: rule needs a status or a match/,
          'a rule without status or match');
patch_bad({ providers => { alpha => { error_rules => [
              { status => 429, regex => 'x' }] } } }, 400, 'unknown_field',
          qr/"regex" in providers\.alpha\.error_rules\[0\]/,
          'a rule with an unknown field');
patch_bad({ providers => { alpha => { error_rules => [
              { status => 700 }] } } }, 400, 'out_of_range',
          qr/status must be between 100 and 599/, 'a rule status 700');
patch_bad({ providers => { alpha => { error_rules => [
              { match => 'x' x 257 }] } } }, 400, 'out_of_range',
          qr/longer than 256 bytes/, 'a match over 256 bytes');
patch_bad({ providers => { alpha => { error_rules => [
              { status => 429, cooldown_ms => 31 * 86400 * 1000 }] } } },
          400, 'out_of_range', qr/between 0 and 30 days/,
          'a rule cooldown over 30 days');
patch_bad({ providers => { alpha => { error_rules => [
              { status => 429, reason => 'sleepy' }] } } }, 400,
          'invalid_value', qr/unknown reason "sleepy"/, 'unknown reason');
patch_bad({ providers => { alpha => { error_rules => [
              { status => 429, scope => 'galaxy' }] } } }, 400,
          'invalid_value', qr/unknown scope "galaxy"/, 'unknown scope');
patch_bad({ providers => { alpha => { error_rules => [
              { status => 402, reason => 'banned', cooldown_ms => 1000 }] } } },
          400, 'invalid_rule', qr/terminal reason/,
          'a terminal reason with a cooldown');
patch_bad({ providers => { alpha => { error_rules => [
              map { +{ status => 429, match => "m$_" } } 1 .. 51] } } },
          400, 'too_many_rules', qr/at most 50 rules/, '51 rules');
patch_bad({ providers => {
              alpha => { error_rules => [
                  map { +{ status => 429, match => "a$_" } } 1 .. 30] },
              gamma => { error_rules => [
                  map { +{ status => 429, match => "g$_" } } 1 .. 21] } } },
          400, 'too_many_rules', qr/at most 50 .* in total, this would make 51/,
          '51 rules over two providers');
patch_bad({ providers => { alpha => { error_default => {
              cooldown_ms => 1000 } } } }, 400, 'out_of_range',
          qr/default cooldown must be between 1m and 30d/,
          'a default under 1 minute');
patch_bad({ providers => { alpha => { error_default => {
              cooldown_ms => 60000, reason => 'banned' } } } }, 400,
          'out_of_range', qr/terminal reason/, 'a terminal default');
patch_bad({ providers => { alpha => { error_default => {
              scope => 'model' } } } }, 400, 'invalid_type',
          qr/cooldown_ms must be an integer/, 'a default without cooldown');
patch_bad({ providers => { alpha => { error_default => [] } } }, 400,
          'invalid_type', qr/error_default must be an object or null/,
          'a default array');
patch_bad({ global => { request_queue => { max_queue_depth => 100001 } } },
          400, 'out_of_range', qr/max_queue_depth: 100001 is out of range/,
          'queue depth over 100000');
patch_bad({ global => { request_queue => { max_wait_ms => 0 } } }, 400,
          'out_of_range', qr/max_wait_ms: 0/, 'queue wait 0');
patch_bad({ global => { queue => {} } }, 400, 'unknown_field',
          qr/"queue" in global/, 'unknown global group');
patch_bad({ global => [] }, 400, 'invalid_type',
          qr/"global" must be an object/, 'global an array');
patch_bad({ global => { stream => { throughput_watchdog => 'on' } } }, 400,
          'invalid_type', qr/throughput_watchdog must be true or false/,
          'watchdog a string');

is(snapshot(), $before, 'no bad request changed anything');

is(api('GET', '/api/resilience')->{json}{providers}{beta}{breaker}
   {open_threshold}, 12, 'the valid part of a rejected PATCH was not applied');

$t->done;

done_testing;
