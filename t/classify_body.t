#!/usr/bin/perl

# R-REQ-4 (body-aware fallback), R-CLASS-1/2, R-CD-3/5/6, R-REQ-6: the
# error body of a failed attempt decides, in the same client request:
# Retry-After cooldowns, concurrency-limit 429s, insufficient_quota,
# agentrouter's restated 403, 无权访问模型, 401, terminal states; the
# 503/404 diagnostics.

use strict;
use warnings;
use utf8;

use FindBin;
use lib "$FindBin::Bin/lib";
use Encode qw(encode_utf8);
use Test::More;
use Time::HiRes qw(sleep);
use OmniTest;

binmode(Test::More->builder->$_, ':encoding(UTF-8)')
    for qw(output failure_output todo_output);

my $t = OmniTest->new;
my $m = $t->mock('p');
my $good = $t->mock('good');

sub esc {
    my ($s) = @_;
    $s = encode_utf8($s);
    $s =~ s/([^A-Za-z0-9_.-])/sprintf('%%%02X', ord $1)/ge;
    return $s;
}

my %keys = (
    rl    => 'status=429,retry=5',
    conc  => 'status=429,body=' . esc('{"error":{"message":"Too many concurrent requests for this model"}}'),
    cn    => 'status=429,body=' . esc('{"error":{"message":"并发数过高，请稍后再试"}}'),
    quota => 'status=429,body=' . esc('{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}'),
    agent => 'status=403,body=' . esc('{"error":{"message":"用户额度不足, 剩余额度: $0.0"}}'),
    deny  => 'status=403,body=' . esc('{"error":{"message":"无权访问模型 claude-x"}}'),
    auth  => 'status=401',
    later => 'status=429,body=' . esc('{"error":{"message":"Rate limit reached. Please try again in 20s."}}'),
    paid  => 'status=402,body=' . esc('{"error":{"message":"Your credit balance is too low"}}'),
);

$t->key_files(\%keys);
$t->write_file('key-good', "sk-good\n");

my $conf = '';
for my $k (sort keys %keys) {
    my $catalog = ($k eq 'agent' || $k eq 'deny') ? ' catalog=agentrouter' : '';
    $conf .= "    omniroute_provider $k url=http://127.0.0.1:%%PORT_mock_p%%/$k"
        . " kind=apikey$catalog;\n"
        . "    omniroute_connection c-$k provider=$k key_file=%%TESTDIR%%/key-$k;\n"
        . "    omniroute_combo $k-chain $k/m good/m;\n";
}

$t->config(<<"EOF");
    omniroute_zone zone=omniroute:1m;

    omniroute_provider good url=http://127.0.0.1:%%PORT_mock_good%%/v1;
    omniroute_connection c-good provider=good key_file=%%TESTDIR%%/key-good;

$conf

    %%GATEWAY%%
EOF

$t->run($t->port('gw'));
my $gw = $t->port('gw');

sub ask {
    my ($model) = @_;
    return $t->post($gw, '/v1/chat/completions', { model => $model });
}

# the cooldown of a provider's only connection, seen in the diagnostics
sub cooling {
    my ($k) = @_;
    my $r = ask("$k/m");
    my $doc = OmniTest::json($r) || {};
    my $ex = $doc->{diagnostics}{excluded}[0] || {};
    return ($r, $ex);
}

for my $k (qw(rl conc cn quota agent auth)) {
    my $r = ask("$k-chain");
    is($r->{status}, 200, "R-REQ-4 $k: falls over to the next target");
    is($r->{headers}{'x-omniroute-attempts'}, '2', "R-REQ-4 $k: two attempts");
}

my ($r, $ex) = cooling('rl');
is($r->{status}, 503, 'R-REQ-6 429 + Retry-After: the connection cools down');
is(OmniTest::json($r)->{error}{code}, 'all_targets_cooling_down',
   'R-REQ-6 code all_targets_cooling_down');
is($ex->{reason}, 'provider_cooldown', 'R-REQ-6 reason provider_cooldown');
is($ex->{target}, 'rl/m', 'R-REQ-6 diagnostics name the target');
is($ex->{connection}, 'c-rl', 'and the connection');
ok($ex->{retry_after_s} >= 4 && $ex->{retry_after_s} <= 5,
   'R-CD-3 for the Retry-After of 5 s') or diag(explain $ex);
ok($r->{headers}{'retry-after'} >= 4 && $r->{headers}{'retry-after'} <= 5,
   'R-REQ-6 Retry-After header: the earliest expiry');

($r, $ex) = cooling('conc');
is($ex->{retry_after_s}, 1, 'R-CD-5 concurrency-limit 429: 1 s cooldown');
($r, $ex) = cooling('cn');
is($ex->{retry_after_s}, 1, 'R-CD-5 并发数过高: 1 s cooldown');
($r, $ex) = cooling('quota');
ok($ex->{retry_after_s} > 3000,
   'R-CLASS-2 insufficient_quota: a long cooldown (quota exhausted)')
    or diag(explain $ex);
($r, $ex) = cooling('agent');
is($r->{status}, 503, 'the restated 403 cooled its connection');
($r, $ex) = cooling('auth');
is($ex->{reason}, 'provider_cooldown', 'R-CLASS-2 401: the connection cools');

# agentrouter's 403 额度不足 as the last candidate: 429 + Retry-After 60
# and the original body (R-CLASS-1)
$t->restart($gw);
$r = ask('agent/m');
is($r->{status}, 429, 'R-CLASS-1 agentrouter 403 额度不足 is restated 429');
like($r->{status_line}, qr{^HTTP/1\.1 429 Too Many Requests},
     'R-CLASS-1 with a corrected status line');
is($r->{headers}{'retry-after'}, '60', 'R-CLASS-1 Retry-After: 60');
is($r->{body}, encode_utf8('{"error":{"message":"用户额度不足, 剩余额度: $0.0"}}'),
   'R-CLASS-1 and the original body');

# a retry hint in the body becomes the client's Retry-After (R-REQ-6)
$r = ask('later/m');
is($r->{status}, 429, 'R-REQ-6 a 429 whose body says "try again in 20s"');
is($r->{headers}{'retry-after'}, '20',
   'R-REQ-6 reaches the client with Retry-After: 20');

# 无权访问模型 is never restated
$r = ask('deny/m');
is($r->{status}, 403, 'R-CLASS-1 403 无权访问模型 stays 403');
ok(!defined $r->{headers}{'retry-after'}, 'without a Retry-After');

# terminal states: 402 credits exhausted is never cleared by time
$r = ask('paid-chain');
is($r->{status}, 200, 'R-CD-6 402: falls over');
sleep(1.2);
$r = ask('paid/m');
is($r->{status}, 404, 'R-REQ-6 only a terminal exclusion: 404');
is(OmniTest::json($r)->{error}{code}, 'no_executable_targets',
   'R-REQ-6 code no_executable_targets');
$ex = OmniTest::json($r)->{diagnostics}{excluded}[0];
is($ex->{reason}, 'terminal', 'R-CD-6 reason terminal');
ok(exists $ex->{retry_after_s} && !defined $ex->{retry_after_s},
   'R-CD-6 with no retry time');

# the same, after a reload: shared state survives it (R-CLUSTER-1)
ask('quota-chain');
$t->reload;
$r = ask('paid/m');
is($r->{status}, 404, 'R-CLUSTER-1 the terminal state survives a reload');
$r = ask('quota/m');
is($r->{status}, 503, 'R-CLUSTER-1 so does a cooldown');

$t->done;
done_testing;
