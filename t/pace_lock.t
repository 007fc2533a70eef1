#!/usr/bin/perl

# R-PACE-3: a 429 whose typed Google RetryInfo asks for longer than the
# queue wait budget ("retryDelay": "86399s", an exhausted daily quota)
# locks that model on that connection (at most 24 h) and falls over; the
# connection is not paused: its other models are served at once.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP;
use Time::HiRes qw(sleep time);
use OmniTest;

my $t = OmniTest->new;
my $m = $t->mock('g');
my $o = $t->mock('o');

my $TOKEN = 'adm-0123456789-abcdefghij';

$ENV{OMNI_TEST_API_TOKEN} = $TOKEN;

my $ri = JSON::PP->new->canonical->encode({ error => {
    code => 429, status => 'RESOURCE_EXHAUSTED',
    message => 'Quota exceeded for metric: generativelanguage.googleapis.com/'
               . 'generate_content_free_tier_requests, limit: 250',
    details => [
        { '@type' => 'type.googleapis.com/google.rpc.QuotaFailure',
          violations => [{ quotaId => 'GenerateRequestsPerDayPerProject' }] },
        { '@type' => 'type.googleapis.com/google.rpc.RetryInfo',
          retryDelay => '86399s' } ] } });

(my $esc = $ri) =~ s/([^A-Za-z0-9_.~-])/sprintf('%%%02X', ord $1)/ge;

$t->write_file('key-g1', "sk-g1~ifmodel=gemini-2.5-pro,status=429,"
                         . "body=$esc\n");
$t->write_file('key-o1', "sk-o1\n");

$t->config(<<'EOF', main => "env OMNI_TEST_API_TOKEN;");
    omniroute_zone zone=omniroute:1m;

    omniroute_provider gemini url=http://127.0.0.1:%%PORT_mock_g%%/v1
                       kind=apikey;
    omniroute_provider other url=http://127.0.0.1:%%PORT_mock_o%%/v1;

    omniroute_connection g1 provider=gemini key_file=%%TESTDIR%%/key-g1
                         pacing=on;
    omniroute_connection o1 provider=other key_file=%%TESTDIR%%/key-o1;

    omniroute_combo pro gemini/gemini-2.5-pro other/backup;

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
    my ($method, $path) = @_;
    my $r = $t->http($gw, OmniTest::request_text($method, $path, undef,
                                 Authorization => "Bearer $TOKEN"));
    $r->{json} = eval { decode_json($r->{body}) };
    return $r;
}

sub metric {
    my ($name) = @_;
    my $r = api('GET', '/metrics');
    return $r->{body} =~ /^\Q$name\E (\d+)/m ? $1 : -1;
}

my $t0 = time;
my $r = $t->post($gw, '/v1/chat/completions', { model => 'pro' });
my $took = time - $t0;

is($r->{status}, 200, 'R-PACE-3 the request falls over ...');
is($r->{headers}{'x-omniroute-connection'}, 'o1', '... to the next target');
like($r->{headers}{'x-omniroute-trail'} // '', qr/^g1;429;\d+ms, o1;200/,
     'R-PACE-3 g1 answered 429 first');
cmp_ok($took, '<', 1, 'R-PACE-3 without waiting: no pause');

is(metric('omniroute_pacing_total{event="lockout"}'), 1,
   'metrics: a long typed wait locked');
is(metric('omniroute_pacing_total{event="pause"}'), 0,
   'metrics: no pause');

# the lockout: exact model on g1, about 24 h (86399 s)

my $s = api('GET', '/api/resilience/model-cooldowns');
my $json = $s->{body};
like($json, qr/"g1".*gemini-2\.5-pro|gemini-2\.5-pro.*"g1"/s,
     'R-PACE-3 the model is locked on the connection (state API)')
    or diag($json);

# the next request skips g1 for that model, at once

$t0 = time;
$r = $t->post($gw, '/v1/chat/completions', { model => 'pro' });
$took = time - $t0;

is($r->{headers}{'x-omniroute-connection'}, 'o1',
   'R-PACE-3 the locked model is skipped');
is($r->{headers}{'x-omniroute-attempts'}, '1', '... without an attempt');
is(scalar(grep { $_->{headers}{authorization} =~ /sk-g1/ } @{$m->requests}),
   1, 'R-PACE-3 g1 got one request only');

# the connection is not paused: its other model goes at once

$t0 = time;
$r = $t->post($gw, '/v1/chat/completions', { model => 'gemini/gemini-flash' });
$took = time - $t0;

is($r->{status}, 200, 'R-PACE-3 the queue is not paused: another model ...');
is($r->{headers}{'x-omniroute-connection'}, 'g1', '... served by g1 ...');
cmp_ok($took, '<', 0.5, '... at once');

# asked directly for the locked model: excluded until the lockout ends

$r = $t->post($gw, '/v1/chat/completions',
              { model => 'gemini/gemini-2.5-pro' });
is($r->{status}, 503, 'R-PACE-3 the locked model alone: 503');
my $d = OmniTest::json($r);
is($d->{diagnostics}{excluded}[0]{reason}, 'model_lockout',
   '... reason model_lockout');
cmp_ok($d->{diagnostics}{excluded}[0]{retry_after_s}, '>', 86000,
       '... for about a day');
cmp_ok($d->{diagnostics}{excluded}[0]{retry_after_s}, '<=', 86400,
       '... at most 24 h');

$t->done;
done_testing;
