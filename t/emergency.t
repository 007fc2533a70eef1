#!/usr/bin/perl

# R-EMERG-1..3: omniroute_emergency_fallback names a last-resort target,
# tried only when every other candidate of a request failed or was
# excluded; switched at runtime through the admin API (PATCH
# emergency_fallback.enabled), its default from OMNIROUTE_EMERGENCY_FALLBACK.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP;
use OmniTest;

my $t = OmniTest->new;
my $p = $t->mock('p');
my $e = $t->mock('e');

my $TOKEN = 'adm-0123456789-abcdefghij';

$ENV{OMNI_TEST_API_TOKEN} = $TOKEN;
$ENV{OMNIROUTE_EMERGENCY_FALLBACK} = 'on';

$t->write_file('key-p1', "sk-p1\n");
$t->write_file('key-p2', "sk-p2\n");
$t->write_file('key-e1', "sk-e1\n");

my $main = "env OMNI_TEST_API_TOKEN;\nenv OMNIROUTE_EMERGENCY_FALLBACK;";

$t->config(<<'EOF', main => $main);
    omniroute_zone zone=omniroute:1m;

    omniroute_provider p url=http://127.0.0.1:%%PORT_mock_p%%/v1;
    omniroute_provider e url=http://127.0.0.1:%%PORT_mock_e%%/v1;

    omniroute_connection p1 provider=p key_file=%%TESTDIR%%/key-p1;
    omniroute_connection p2 provider=p key_file=%%TESTDIR%%/key-p2
                         priority=2;
    omniroute_connection e1 provider=e key_file=%%TESTDIR%%/key-e1;

    omniroute_combo smart p/gpt-4.1 p/gpt-4o;

    omniroute_emergency_fallback e1/local-llama;

    server {
        listen 127.0.0.1:%%PORT_gw%%;

        location /v1/ {
            omniroute_pass;
            omniroute_attempt_trail on;
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

sub api {
    my ($method, $path, $body) = @_;
    my %h = (Authorization => "Bearer $TOKEN");
    if (defined $body) {
        $body = encode_json($body) if ref $body;
        $h{'Content-Type'} = 'application/json';
    }
    my $r = $t->http($gw, OmniTest::request_text($method, $path, $body, %h));
    $r->{json} = eval { decode_json($r->{body}) };
    return $r;
}

sub metric {
    my ($name) = @_;
    my $r = api('GET', '/metrics');
    return $r->{body} =~ /^\Q$name\E (\d+)/m ? $1 : -1;
}

sub reset_state {
    api('POST', '/api/resilience/cooldowns', { all => JSON::PP::true });
    api('POST', '/api/resilience/reset', {});
}

# healthy: the emergency target is never used

my $r = $t->post($gw, '/v1/chat/completions', { model => 'smart' });
is($r->{headers}{'x-omniroute-connection'}, 'p1', 'R-EMERG-1 healthy: p1');
is(scalar @{$e->requests}, 0, 'R-EMERG-1 the emergency target is not used');

# every candidate fails: the emergency target, last

$p->set_behavior('status=503');

$r = $t->post($gw, '/v1/chat/completions', { model => 'smart' });
is($r->{status}, 200, 'R-EMERG-1 every candidate failed: served ...');
is($r->{headers}{'x-omniroute-connection'}, 'e1', '... by the emergency '
   . 'target');
like($r->{headers}{'x-omniroute-trail'} // '',
     qr/^p1;503;\d+ms, p2;503;\d+ms, e1;200/,
     'R-EMERG-1 after both connections (cooling, p/gpt-4o is excluded)')
    or diag($r->{headers}{'x-omniroute-trail'});
is(decode_json($e->requests->[0]{body})->{model}, 'local-llama',
   'R-EMERG-1 with its own model');
is(metric('omniroute_emergency_fallback_total'), 1, 'metrics: counted');
like($t->error_log, qr/emergency fallback "e1\/local-llama"/, 'logged (warn)');

# every candidate excluded (cooling down): the emergency target too

$r = $t->post($gw, '/v1/chat/completions', { model => 'smart' });
is($r->{status}, 200, 'R-EMERG-1 every candidate excluded: served ...');
is($r->{headers}{'x-omniroute-connection'}, 'e1', '... by the emergency '
   . 'target');
is($r->{headers}{'x-omniroute-attempts'}, '1', '... the only attempt');

# switched off at runtime

$r = api('PATCH', '/api/resilience',
         { global => { emergency_fallback => { enabled => JSON::PP::false } } });
is($r->{status}, 200, 'R-EMERG-2 PATCH emergency_fallback.enabled false');

my $s = api('GET', '/api/resilience');
is($s->{json}{global}{emergency_fallback}{enabled}, JSON::PP::false,
   'R-EMERG-2 the setting reads off');
is($s->{json}{global}{sources}{emergency_fallback}{enabled}, 'runtime',
   '... from the runtime');

reset_state();
my $n = @{$e->requests};

$r = $t->post($gw, '/v1/chat/completions', { model => 'smart' });
is($r->{status}, 503, 'R-EMERG-2 off: the provider\'s error');
is(scalar @{$e->requests}, $n, 'R-EMERG-2 off: not used');

$r = $t->post($gw, '/v1/chat/completions', { model => 'smart' });
is($r->{status}, 503, 'R-EMERG-2 off: every candidate excluded: as before '
   . '(the combo waits out the cooldown, then the provider\'s error)');
is(scalar @{$e->requests}, $n, 'R-EMERG-2 off: still not used');

# on again

api('PATCH', '/api/resilience',
    { global => { emergency_fallback => { enabled => JSON::PP::true } } });

$r = $t->post($gw, '/v1/chat/completions', { model => 'smart' });
is($r->{headers}{'x-omniroute-connection'}, 'e1',
   'R-EMERG-2 on again at runtime');

# the provider works again: the emergency target is left alone

reset_state();
$p->set_behavior('ok');
$n = @{$e->requests};

$r = $t->post($gw, '/v1/chat/completions', { model => 'smart' });
is($r->{headers}{'x-omniroute-connection'}, 'p1', 'R-EMERG-1 healthy again')
    or diag("$r->{status} $r->{body} " . ($r->{headers}{'x-omniroute-trail'} // ''));
is(scalar @{$e->requests}, $n, 'R-EMERG-1 ... the emergency target unused');

# nginx -t: what the directive may name

$t->config(<<'EOF');
    omniroute_provider p url=http://127.0.0.1:1/v1;
    omniroute_connection p1 provider=p key_file=%%TESTDIR%%/key-p1;
    omniroute_emergency_fallback nope/m;
EOF
my ($rc, $out) = $t->test_config;
isnt($rc, 0, 'R-EMERG-3 an unknown connection is refused');
like($out, qr/names unknown connection "nope"/, '... saying so');

$t->config(<<'EOF');
    omniroute_provider p url=http://127.0.0.1:1/v1;
    omniroute_connection p1 provider=p key_file=%%TESTDIR%%/key-p1;
    omniroute_emergency_fallback p1;
EOF
($rc, $out) = $t->test_config;
isnt($rc, 0, 'R-EMERG-3 no model is refused');
like($out, qr/expected <connection>\/<model>/, '... saying so');

$t->config(<<'EOF');
    omniroute_provider p url=http://127.0.0.1:1/v1;
    omniroute_connection p1 provider=p key_file=%%TESTDIR%%/key-p1
                         models=gpt-4o;
    omniroute_emergency_fallback p1/other;
EOF
($rc, $out) = $t->test_config;
isnt($rc, 0, 'R-EMERG-3 a model the connection may not serve is refused');
like($out, qr/may not serve model "other"/, '... saying so');

$t->done;
done_testing;
