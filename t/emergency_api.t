#!/usr/bin/perl

# Issue 25, finding 1: the emergency target serves only requests of its
# API (an OpenAI-compatible one never answers an Anthropic /v1/messages
# request), and when it fails too the client gets the most informative
# real error: the candidate's 429 with its Retry-After (the trail shows
# both), or, while every candidate cools down, the gateway's own answer
# with a Retry-After, never the emergency target's 404.

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

my $nf = '{"error":{"message":"The model `local-llama` does not exist",'
       . '"type":"invalid_request_error","code":"model_not_found"}}';

$t->write_file('key-oa1', "sk-oa1~status=429,retry=30\n");
$t->write_file('key-an1', "sk-an1~status=429,retry=30\n");
$t->write_file('key-e1', "sk-e1\n");

$t->config(<<'EOF');
    omniroute_zone zone=omniroute:1m;

    omniroute_provider oa url=http://127.0.0.1:%%PORT_mock_p%%/v1;
    omniroute_provider an url=http://127.0.0.1:%%PORT_mock_p%%/v1
                       auth=x-api-key header=anthropic-version:2023-06-01;
    omniroute_provider e url=http://127.0.0.1:%%PORT_mock_e%%/v1;

    omniroute_connection oa1 provider=oa key_file=%%TESTDIR%%/key-oa1;
    omniroute_connection an1 provider=an key_file=%%TESTDIR%%/key-an1;
    omniroute_connection e1 provider=e key_file=%%TESTDIR%%/key-e1;

    omniroute_model gpt oa/gpt-4o;
    omniroute_model claude an/claude-sonnet-4-5;

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
    }
EOF

$t->run($t->port('gw'));
my $gw = $t->port('gw');

# an Anthropic request: the OpenAI-compatible emergency target is not used

my $r = $t->post($gw, '/v1/messages',
                 { model => 'claude', max_tokens => 16,
                   messages => [{ role => 'user', content => 'hi' }] });
is($r->{status}, 429, 'Anthropic request: the real 429 ...');
is($r->{headers}{'retry-after'}, '30', '... with its Retry-After');
is($r->{headers}{'x-omniroute-connection'}, 'an1', '... of an1');
is(scalar @{$e->requests}, 0,
   'the emergency target (OpenAI API) never got the Anthropic request');
like($t->error_log, qr/emergency fallback "e1" serves another API/,
     'logged (info)');

# a Chat request: the emergency target is tried, fails with a 404; the
# client gets the 429, the trail shows both

$e->set_behavior('status=404,body=' . uri($nf));

$r = $t->post($gw, '/v1/chat/completions', { model => 'gpt' });
is($r->{status}, 429, 'Chat request, the emergency target failed too: the '
   . 'real 429 ...');
is($r->{headers}{'retry-after'}, '30', '... with its Retry-After');
is($r->{headers}{'x-omniroute-connection'}, 'oa1', '... of oa1');
unlike($r->{body}, qr/model_not_found/, '... not the emergency\'s 404');
like($r->{headers}{'x-omniroute-trail'} // '',
     qr/^oa1;429;\d+ms, e1;404;\d+ms$/, 'the trail shows both')
    or diag($r->{headers}{'x-omniroute-trail'});
is(scalar @{$e->requests}, 1, 'the emergency target got the Chat request');

# while oa1 cools down: the emergency target fails again; the client is
# told when to come back, not the 404

$r = $t->post($gw, '/v1/chat/completions', { model => 'gpt' });
isnt($r->{status}, 404, 'cooling, the emergency failed: not its 404')
    or diag($r->{body});
ok($r->{status} == 429 || $r->{status} == 503,
   "... a 429 or 503 ($r->{status})");
like($r->{headers}{'retry-after'} // '', qr/^\d+$/, '... with Retry-After');
cmp_ok($r->{headers}{'retry-after'} // 0, '>', 20,
       '... close to the cooldown left (30 s)');
like($r->{headers}{'x-omniroute-trail'} // '', qr/e1;404;\d+ms/,
     '... the trail shows the emergency attempt');

# the emergency target works: it serves the Chat request

$e->set_behavior('ok');
$r = $t->post($gw, '/v1/chat/completions', { model => 'gpt' });
is($r->{status}, 200, 'the emergency target answers a Chat request');
is($r->{headers}{'x-omniroute-connection'}, 'e1', '... as e1');

sub uri {
    my ($s) = @_;
    $s =~ s/([^A-Za-z0-9_.~-])/sprintf('%%%02X', ord $1)/ge;
    return $s;
}

$t->done;
done_testing;
