#!/usr/bin/perl

# R-CLASS-1..3, R-ML-2 (issue 11): agentrouter's "无权访问模型" (no access to
# this model) locks that model on that connection, capped by the model
# lockout's max cooldown (30 min), even with the opt-in lockout off; the
# connection itself stays active and serves other models.  A body whose
# markers are JSON-escaped ("\u7528\u6237\u989d\u5ea6\u4e0d\u8db3") is
# restated like the plain one: the client sees 429 with Retry-After 60,
# while the connection's own cooldown follows the backoff.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP;
use OmniTest;

my $t = OmniTest->new;
my $m = $t->mock('p');

my $TOKEN = 'streams-0123456789-abcdef';
$ENV{OMNI_TEST_API_TOKEN} = $TOKEN;

sub esc {
    my ($s) = @_;
    utf8::encode($s) if utf8::is_utf8($s);
    $s =~ s/([^A-Za-z0-9_.~-])/sprintf('%%%02X', ord $1)/ge;
    return $s;
}

# "denied" is refused on connection ar; any other model is served by it
$t->write_file('key-ar', 'sk-ar~ifmodel=denied,status=403,body='
               . esc('{"error":{"message":"无权访问模型 denied",'
                     . '"type":"new_api_error"}}') . "\n");
$t->write_file('key-ae', 'sk-ae~status=403,body='
               . esc('{"error":{"message":"\u7528\u6237\u989d\u5ea6'
                     . '\u4e0d\u8db3","type":"new_api_error"}}') . "\n");
$t->write_file('key-ok', "sk-ok\n");

$t->config(<<'EOF2');
    omniroute_zone zone=omniroute:1m;

    omniroute_provider ar url=http://127.0.0.1:%%PORT_mock_p%%/ar
                       catalog=agentrouter;
    omniroute_provider ae url=http://127.0.0.1:%%PORT_mock_p%%/ae
                       catalog=agentrouter;
    omniroute_provider ok url=http://127.0.0.1:%%PORT_mock_p%%/ok;

    omniroute_connection ar provider=ar key_file=%%TESTDIR%%/key-ar;
    omniroute_connection ae provider=ae key_file=%%TESTDIR%%/key-ae;
    omniroute_connection ok provider=ok key_file=%%TESTDIR%%/key-ok;

    omniroute_combo denied ar/denied ok/m;
    omniroute_combo other ar/other ok/m;
    omniroute_combo esc ae/m;

    omniroute_api_token env=OMNI_TEST_API_TOKEN;

    %%GATEWAY%%
EOF2

# the API on the gateway server
my $conf = $t->read_file('nginx.conf');
$conf =~ s{(location /v1/ \{)}{location /api/ {\n            omniroute_api;\n        }\n\n        $1};
$t->write_file('nginx.conf', $conf);

$t->run($t->port('gw'));
my $gw = $t->port('gw');

sub api {
    my ($path) = @_;
    return OmniTest::json($t->get($gw, $path,
                                  Authorization => "Bearer $TOKEN"));
}

# no access to the model: that model locked, never the connection

my $r = $t->post($gw, '/v1/chat/completions', { model => 'denied' });
is($r->{status}, 200, 'issue 11: 403 无权访问模型 falls over');
is($r->{headers}{'x-omniroute-connection'}, 'ok', 'to the next target');

my $c = api('/api/resilience/cooldowns?provider=ar')->{connections}[0];
is($c->{status}, 'active',
   'issue 11: the connection is not cooled (it serves other models)');

my $lo = api('/api/resilience/model-cooldowns?connection=ar');
is($lo->{count}, 1, 'issue 11: one model lockout');
my $l = $lo->{lockouts}[0];
is($l->{model}, 'denied', 'of that model');
is($l->{scope}, 'exact', 'scope model (the exact model key)');
ok($l->{retry_after_ms} > 29 * 60 * 1000
   && $l->{retry_after_ms} <= 30 * 60 * 1000,
   'issue 11: for the lockout\'s max cooldown (30 min), not 6 h')
    or diag(explain $l);

$r = $t->post($gw, '/v1/chat/completions', { model => 'other' });
is($r->{headers}{'x-omniroute-connection'}, 'ar',
   'issue 11: the connection still serves another model');

$r = $t->post($gw, '/v1/chat/completions', { model => 'denied' });
is($r->{headers}{'x-omniroute-connection'}, 'ok',
   'the locked model is skipped on ar');
is($r->{headers}{'x-omniroute-attempts'}, '1', 'without an attempt');

# JSON-escaped quota markers are restated

$r = $t->post($gw, '/v1/chat/completions', { model => 'esc' });
is($r->{status}, 429,
   'issue 11: an escaped 用户额度不足 403 is restated 429');
is($r->{headers}{'retry-after'}, '60', 'the client is told Retry-After: 60');
like($r->{body}, qr/\\u7528/, 'the original body');

$c = api('/api/resilience/cooldowns?provider=ae')->{connections}[0];
is($c->{last_error_type}, 'quota_exhausted', 'recorded as quota_exhausted');
is($c->{status}, 'cooldown', 'the connection cools down');
# the restated Retry-After is a hint like the provider's own (issue 25,
# docs/resilience.md): the connection cools for the 60 s the client was
# told, so the next answer says the same (this once asserted "< 60000",
# true only because a millisecond or more had passed)
ok($c->{retry_after_ms} > 55000 && $c->{retry_after_ms} <= 60000,
   'its cooldown is the 60 s the client was told')
    or diag(explain $c);

$t->done;
done_testing;
