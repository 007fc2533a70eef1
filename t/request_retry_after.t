#!/usr/bin/perl

# Issue 25, finding 7: one Retry-After, agreeing with the state.  A
# provider's own 503 on the last attempt carries the cooldown the gateway
# just recorded for the connection; a restated 429 (agentrouter's 403
# 用户额度不足, "Retry-After: 60") cools the connection for those 60 s, so
# the next answer says the same and the provider is not asked again
# before; the gateway's own answers say nosniff.

use strict;
use warnings;
use utf8;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP;
use OmniTest;

my $t = OmniTest->new;
my $m = $t->mock('p');

my $TOKEN = 'ra-agree-0123456789-abcdef';
$ENV{OMNI_TEST_API_TOKEN} = $TOKEN;

my $quota = '{"error":{"message":"用户额度不足, 剩余额度: $0.0"}}';
utf8::encode($quota);
(my $q = $quota) =~ s/([^A-Za-z0-9_.~-])/sprintf('%%%02X', ord $1)/ge;

$t->write_file('key-busy', "sk-busy~status=503\n");
$t->write_file('key-agent', "sk-agent~status=403,body=$q\n");

$t->config(<<'EOF');
    omniroute_zone zone=omniroute:1m;

    omniroute_provider busy url=http://127.0.0.1:%%PORT_mock_p%%/busy
                       cooldown_base=3s;
    omniroute_provider agent url=http://127.0.0.1:%%PORT_mock_p%%/agent
                       catalog=agentrouter;

    omniroute_connection busy provider=busy key_file=%%TESTDIR%%/key-busy;
    omniroute_connection agent provider=agent key_file=%%TESTDIR%%/key-agent;

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
    }
EOF

$t->run($t->port('gw'));
my $gw = $t->port('gw');

sub cooldown_ms {
    my ($id) = @_;
    my $r = $t->get($gw, "/api/resilience/cooldowns?provider=$id",
                    Authorization => "Bearer $TOKEN");
    return OmniTest::json($r)->{connections}[0]{retry_after_ms} // 0;
}

# a provider's own 503 without Retry-After: the cooldown just recorded

my $r = $t->post($gw, '/v1/chat/completions', { model => 'busy/m' });
is($r->{status}, 503, 'the provider\'s 503 reaches the client');
my $ra = $r->{headers}{'retry-after'} // '';
like($ra, qr/^\d+$/, 'with a Retry-After (the provider sent none)');
my $cd = cooldown_ms('busy');
ok($cd > 0 && $ra >= int($cd / 1000) && $ra <= int($cd / 1000) + 1,
   "it agrees with the cooldown recorded ($ra s, $cd ms left)")
    or diag("retry-after $ra, cooldown $cd ms");

$r = $t->post($gw, '/v1/chat/completions', { model => 'busy/m' });
is($r->{status}, 503, 'the next request while cooling: 503');
is(OmniTest::json($r)->{error}{code}, 'all_targets_cooling_down',
   '... all_targets_cooling_down');
ok(($r->{headers}{'retry-after'} // 0) <= $ra,
   '... its Retry-After no later than the first one said');
is($r->{headers}{'x-content-type-options'}, 'nosniff',
   '... the gateway\'s own JSON error says nosniff');

# a restated 429 "Retry-After: 60": the connection cools for 60 s

$m->clear;
$r = $t->post($gw, '/v1/chat/completions', { model => 'agent/m' });
is($r->{status}, 429, 'agentrouter quota text is restated 429');
is($r->{headers}{'retry-after'}, '60', '... Retry-After: 60');
$cd = cooldown_ms('agent');
ok($cd > 55000 && $cd <= 60000,
   "the connection cools for those 60 s ($cd ms), not the backoff")
    or diag("cooldown $cd ms");

$r = $t->post($gw, '/v1/chat/completions', { model => 'agent/m' });
is($r->{status}, 503, 'the next request: 503 all_targets_cooling_down');
cmp_ok($r->{headers}{'retry-after'} // 0, '>', 55,
       '... with the same deadline (about 60 s, not 3)');
is($m->tried, 'agent', 'the provider was not asked again');

$t->done;
done_testing;
