#!/usr/bin/perl

# R-EMERG-1: the emergency target is counted and logged when it is used,
# not when the request path merely asks whether another attempt would be
# possible (the probe of a stream, the fall-over check) while the first
# attempt is still running; its attempts are counted per (model,
# connection) pair with the configured names as labels.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP;
use OmniTest;

my $t = OmniTest->new;
my $q = $t->mock('q');
my $e = $t->mock('e');

my $TOKEN = 'adm-0123456789-abcdefghij';

$ENV{OMNI_TEST_API_TOKEN} = $TOKEN;

$t->write_file('key-q1', "sk-q1\n");
$t->write_file('key-e1', "sk-e1\n");

$t->config(<<'EOF', main => "env OMNI_TEST_API_TOKEN;");
    omniroute_zone zone=omniroute:1m;

    omniroute_provider q url=http://127.0.0.1:%%PORT_mock_q%%/v1;
    omniroute_provider e url=http://127.0.0.1:%%PORT_mock_e%%/v1;

    omniroute_connection q1 provider=q key_file=%%TESTDIR%%/key-q1;
    omniroute_connection e1 provider=e key_file=%%TESTDIR%%/key-e1;

    omniroute_model solo q/gpt-4.1;

    omniroute_emergency_fallback e1/local-llama;

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
my $gw = $t->port('gw');

sub metrics {
    my $r = $t->http($gw, OmniTest::request_text('GET', '/metrics', undef,
                                                 Authorization =>
                                                     "Bearer $TOKEN"));
    return $r->{body};
}

sub emergency_total {
    my ($n) = metrics() =~ /^omniroute_emergency_fallback_total (\d+)/m;
    return $n // -1;
}

sub warns {
    my @w = $t->error_log
        =~ /(every candidate of "solo" failed or was excluded[^\n]*)/g;
    return scalar @w;
}

# 1. healthy requests, plain and streamed (a stream is probed while
#    another attempt is possible: the emergency target is that attempt)

for my $i (1 .. 3) {
    my $r = $t->post($gw, '/v1/chat/completions', { model => 'solo' });
    is($r->{status}, 200, "healthy request $i: 200");
    is($r->{headers}{'x-omniroute-connection'}, 'q1', '... served by q1');
}

$q->set_behavior('sse=2,gap=10');

my $s = $t->post($gw, '/v1/chat/completions',
                 { model => 'solo', stream => JSON::PP::true });
is($s->{status}, 200, 'healthy stream: 200');
like($s->{body}, qr/\[DONE\]/, '... whole');

$q->set_behavior(undef);

is(scalar @{$e->requests}, 0, 'the emergency target got no request');
is(emergency_total(), 0,
   'omniroute_emergency_fallback_total stays 0 on healthy requests');
is(warns(), 0, 'no emergency warn on healthy requests');

# 2. q1 fails: the emergency target serves, counted and logged once

$q->set_behavior('status=503');

my $r = $t->post($gw, '/v1/chat/completions', { model => 'solo' });
is($r->{status}, 200, 'q1 fails: answered by the emergency target');
is($r->{headers}{'x-omniroute-connection'}, 'e1', '... e1');
is(scalar @{$e->requests}, 1, 'the emergency target got the request');
is($e->requests->[0]{body}
       && decode_json($e->requests->[0]{body})->{model}, 'local-llama',
   '... for its own model');

is(emergency_total(), 1, 'omniroute_emergency_fallback_total 1');
is(warns(), 1, 'one emergency warn');

# 3. its attempt is counted per pair, labels from the configuration

my $m = metrics();

like($m, qr/^omniroute_connection_attempts_total\{provider="e",
            connection="e1",model="solo",reason="none"\}\ 1$/mx,
     'the emergency attempt is counted for (solo, e1)')
    or diag(join "\n", grep { /attempts_total/ } split /\n/, $m);
like($m, qr/^omniroute_connection_attempts_total\{provider="q",
            connection="q1",model="solo",reason="server_error"\}\ 1$/mx,
     'the failed attempt for (solo, q1)');
like($m, qr/^omniroute_connection_fallbacks_total\{provider="q",
            connection="q1",model="solo",reason="server_error"\}\ 1$/mx,
     'the fall-over from q1');

$t->check_error_log;

done_testing;
