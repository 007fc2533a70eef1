#!/usr/bin/perl

# R-REQ-4: in-request fallback across 3 connections of 2 providers with
# different base paths and credential styles; R-REQ-7 route headers.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use OmniTest;

my $t = OmniTest->new;
my $m = $t->mock('p');

$t->write_file('key-a1', "sk-a1~status=503\n");
$t->write_file('key-a2', "sk-a2~status=429,retry=7\n");
$t->write_file('key-b1', "sk-b1\n");

$t->config(<<'EOF');
    omniroute_zone zone=omniroute:1m;

    omniroute_provider alpha url=http://127.0.0.1:%%PORT_mock_p%%/alpha/api/v1
                       kind=apikey auth=bearer;
    omniroute_provider beta  url=http://127.0.0.1:%%PORT_mock_p%%/beta/v1/
                       kind=oauth auth=x-api-key
                       header=anthropic-version:2023-06-01;

    omniroute_connection a1 provider=alpha key_file=%%TESTDIR%%/key-a1
                         priority=1;
    omniroute_connection a2 provider=alpha key_file=%%TESTDIR%%/key-a2
                         priority=2;
    omniroute_connection b1 provider=beta key_file=%%TESTDIR%%/key-b1;

    omniroute_combo smart alpha/gpt-up beta/claude-up;

    log_format omni '$status model=$omniroute_model '
                    'conn=$omniroute_connection provider=$omniroute_provider '
                    'up=$omniroute_upstream_model tries=$omniroute_attempts';
    access_log %%TESTDIR%%/logs/omni.log omni;

    %%GATEWAY%%
EOF

$t->run($t->port('gw'));

my $r = $t->post($t->port('gw'), '/v1/chat/completions',
    { model => 'smart', messages => [{ role => 'user', content => 'hi' }] });

is($r->{status}, 200, 'R-REQ-4 fallback ends in success');
is($r->{headers}{'x-omniroute-connection'}, 'b1',
   'R-REQ-7 X-OmniRoute-Connection names the connection that answered');
is($r->{headers}{'x-omniroute-attempts'}, '3',
   'R-REQ-7 X-OmniRoute-Attempts counts all three attempts');
my $doc = OmniTest::json($r);
is($doc->{provider}, 'p', 'the body is the provider\'s');
is($doc->{model}, 'claude-up',
   'the winning attempt carried its upstream model');

my $reqs = $m->requests;
is(scalar @$reqs, 3, 'the mock saw exactly three attempts');

is($reqs->[0]{path}, '/alpha/api/v1/chat/completions',
   'attempt 1 went to alpha\'s base path');
is($reqs->[0]{headers}{authorization}, 'Bearer sk-a1~status=503',
   'attempt 1 used a1\'s credential as a bearer token');
is($reqs->[1]{headers}{authorization}, 'Bearer sk-a2~status=429,retry=7',
   'attempt 2 (after a 503) used a2\'s credential');
is($reqs->[2]{path}, '/beta/v1/chat/completions',
   'attempt 3 (after a 429) went to beta\'s base path');
is($reqs->[2]{headers}{'x-api-key'}, 'sk-b1',
   'attempt 3 sent b1\'s credential as x-api-key');
ok(!exists $reqs->[2]{headers}{authorization},
   'attempt 3 carried no Authorization header');
is($reqs->[2]{headers}{'anthropic-version'}, '2023-06-01',
   'beta\'s fixed header was sent');

# every attempt has the right upstream model and a matching length
for my $i (0 .. 2) {
    my $want = $i < 2 ? 'gpt-up' : 'claude-up';
    my $body = JSON::PP::decode_json($reqs->[$i]{body});
    is($body->{model}, $want, "attempt " . ($i + 1) . " body names $want");
    is($reqs->[$i]{headers}{'content-length'}, length $reqs->[$i]{body},
       "attempt " . ($i + 1) . " Content-Length matches the body");
    is_deeply($body->{messages}, [{ role => 'user', content => 'hi' }],
       "attempt " . ($i + 1) . " kept the rest of the body");
}

# all candidates fail: the client gets the last provider error (fresh
# state: the failures above put a1 and a2 in cooldown)
$t->restart($t->port('gw'));
$m->clear;
$m->set_behavior('status=529,retry=11');

$r = $t->post($t->port('gw'), '/v1/chat/completions', { model => 'smart' });
is($r->{status}, 529, 'every attempt failed: the last provider status');
is($r->{headers}{'retry-after'}, '11', 'with its Retry-After');
like($r->{body}, qr/mock p error 529/, 'and its body');
is($r->{headers}{'x-omniroute-attempts'}, '3', 'after three attempts');
is($r->{headers}{'x-omniroute-connection'}, 'b1',
   'naming the last connection');
is(scalar @{$m->requests}, 3, 'the provider saw three attempts');

# a status that does not fall over is passed through at once
$t->restart($t->port('gw'));
$m->clear;
$m->set_behavior('status=400');
$r = $t->post($t->port('gw'), '/v1/chat/completions', { model => 'smart' });
is($r->{status}, 400, 'a 400 is the client\'s answer');
is($r->{headers}{'x-omniroute-attempts'}, '1', 'after one attempt');
is(scalar @{$m->requests}, 1, 'and no fallback');

# the direct provider/model form
$t->restart($t->port('gw'));
$m->clear;
$m->set_behavior(undef);
$r = $t->post($t->port('gw'), '/v1/chat/completions',
              { model => 'beta/direct-model' });
is($r->{status}, 200, 'provider/model names a target directly');
is(OmniTest::json($r)->{model}, 'direct-model',
   'with the model after the slash');
is($m->requests->[0]{path}, '/beta/v1/chat/completions', 'at beta\'s path');

# R-REQ-7 the module variables in an access log line (written after the
# response: stop nginx first so every line is there)
$t->stop;
my @log = split /\n/, $t->read_file('logs/omni.log');
is($log[0], '200 model=smart conn=b1 provider=beta up=claude-up tries=3',
   'R-REQ-7 variables: the fallback request');
is($log[1], '529 model=smart conn=b1 provider=beta up=claude-up tries=3',
   'R-REQ-7 variables: the all-failed request');
is($log[3], '200 model=beta/direct-model conn=b1 provider=beta '
   . 'up=direct-model tries=1', 'R-REQ-7 variables: a direct target');

$t->done;
done_testing;
