#!/usr/bin/perl

# The memo of a model's first excluded routes (ngx_omniroute_plan_memo.c):
# a worker that found a model's first connections excluded by their
# states alone lists the same exclusions on the next requests without
# checking them again, while the connection and breaker tables are
# unchanged and before the first of those cooldowns ends.  What a client
# can tell: the same answers, the same 503 diagnostics (their retry times
# counted down), a lapsed cooldown tried again, an operator's reset seen
# at once by both workers.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP;
use Time::HiRes qw(sleep time);
use OmniTest;

my $t = OmniTest->new(workers => 2);
my $m = $t->mock('p');

my $TOKEN = 'memo-0123456789-abcdef';
$ENV{OMNI_TEST_API_TOKEN} = $TOKEN;

# alpha: m1 cools an hour, m2 two seconds, m3 is out of credits
# (terminal), m4 answers; beta: every connection excluded; gamma: g1
# cools three seconds
$t->write_file('key-m1', "sk-m1~status=429,retry=3600\n");
$t->write_file('key-m2', "sk-m2~status=429,retry=2\n");
$t->write_file('key-m3', "sk-m3~status=402\n");
$t->write_file('key-m4', "sk-m4\n");
$t->write_file('key-b1', "sk-b1~status=429,retry=3600\n");
$t->write_file('key-b2', "sk-b2~status=402\n");
$t->write_file('key-g1', "sk-g1~status=429,retry=3\n");
$t->write_file('key-g2', "sk-g2\n");

$t->config(<<'EOF');
    omniroute_zone zone=omniroute:1m;

    omniroute_provider alpha url=http://127.0.0.1:%%PORT_mock_p%%/alpha
                       kind=apikey;
    omniroute_connection m1 provider=alpha key_file=%%TESTDIR%%/key-m1;
    omniroute_connection m2 provider=alpha key_file=%%TESTDIR%%/key-m2;
    omniroute_connection m3 provider=alpha key_file=%%TESTDIR%%/key-m3;
    omniroute_connection m4 provider=alpha key_file=%%TESTDIR%%/key-m4
                         priority=1;

    omniroute_provider beta url=http://127.0.0.1:%%PORT_mock_p%%/beta
                       kind=apikey;
    omniroute_connection b1 provider=beta key_file=%%TESTDIR%%/key-b1;
    omniroute_connection b2 provider=beta key_file=%%TESTDIR%%/key-b2;

    omniroute_provider gamma url=http://127.0.0.1:%%PORT_mock_p%%/gamma
                       kind=apikey;
    omniroute_connection g1 provider=gamma key_file=%%TESTDIR%%/key-g1;
    omniroute_connection g2 provider=gamma key_file=%%TESTDIR%%/key-g2
                         priority=1;

    omniroute_model pool alpha/m;
    omniroute_model none beta/x;
    omniroute_model lapse gamma/z;

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

# a coding agent's body (fixtures/agent_body.py), else a short one
my $body = OmniTest::agent_body(20, 'MODEL')
    // '{"model":"MODEL","messages":[{"role":"user","content":"hi"}]}';

sub chat {
    my ($model) = @_;
    (my $b = $body) =~ s/"MODEL"/"$model"/;
    my $r = $t->post($gw, '/v1/chat/completions', $b);
    $r->{json} = eval { decode_json($r->{body}) };
    return $r;
}

sub tried { return $m->tried }

sub api {
    my ($path, $doc) = @_;
    return $t->api_post($gw, $path, $doc, $TOKEN)->{json};
}

# the first request meets every state

$m->clear;
my $r = chat('pool');
is($r->{status}, 402, 'pool: the third attempt\'s answer (max_attempts 3)');
is(tried(), 'm1 m2 m3', 'm1 and m2 answered 429, m3 402');

my %seen;
for (1 .. 10) {
    $r = chat('pool');
    $seen{"$r->{status} " . tried()}++;
}
is_deeply(\%seen, { '200 m4' => 10 },
          'the next 10, in both workers: m4 alone, m1 to m3 passed over');

# while m1 cools, an operator resets m3 (in either worker): the next
# request (in either worker) tries it; 8 rounds, m3 terminal again after
# each (its key still answers 402)


my ($resets, $tried_m3, $quiet) = (0, 0, 1);
for my $round (1 .. 8) {
    for (1 .. 6) {
        $r = chat('pool');
        my $seen = tried();
        $quiet = 0 unless $r->{status} == 200 && $seen =~ /^(m2 )?m4$/;
    }

    my $reset = api('/api/resilience/terminal-reset', { connectionId => 'm3' });
    $resets++ if $reset->{reset};

    $r = chat('pool');
    my $after = tried();
    if ($after =~ /\bm3\b/) {
        $tried_m3++;
    } else {
        diag("round $round: after the reset: $after");
    }
}
ok($quiet, 'between the resets: m4 answers, m1 and m3 passed over');
is($resets, 8, 'm3 reset by the operator 8 times');
is($tried_m3, 8, 'after each reset the next request tried m3');

# every route excluded: the same diagnostics, checked or memoized

$m->clear;
$r = chat('none');
is($r->{status}, 402, 'none: the last attempt\'s answer');
is(tried(), 'b1 b2', 'b1 answered 429, b2 402');

my (@diags, $bad);
for (1 .. 8) {
    my $t0 = time;
    $r = chat('none');
    push @diags, [$t0, $r];
    $bad++ unless $r->{status} == 503;
}
is(tried(), '', 'none: no attempt while both are excluded');
ok(!$bad, 'every answer a 503');

my $first = $diags[0][1]{json}{diagnostics}{excluded};
is(ref $first, 'ARRAY', 'diagnostics.excluded') or diag($diags[0][1]{body});
is(join(' ', map { "$_->{connection}:$_->{reason}" } @{$first // []}),
   'b1:provider_cooldown b2:terminal',
   'b1 cooling, b2 terminal, in route order');

my ($same, $down) = (1, 1);
my $prev = $first->[0]{retry_after_s} // -1;
for my $d (@diags) {
    my $ex = $d->[1]{json}{diagnostics}{excluded} // [];
    my @strip = map { my %h = %$_; delete @h{grep { /retry/ } keys %h}; \%h } @$ex;
    my @base = map { my %h = %$_; delete @h{grep { /retry/ } keys %h}; \%h } @$first;
    $same = 0 unless JSON::PP->new->canonical->encode(\@strip)
                     eq JSON::PP->new->canonical->encode(\@base);
    my $s = $ex->[0]{retry_after_s} // -1;
    $down = 0 unless $s <= $prev && $s > 3500;
    $prev = $s;
}
ok($same, 'the 8 answers list the same exclusions (both workers, checked '
   . 'or memoized)');
ok($down, "b1's retry time counts down from 3600 s ($prev s)");
ok(!defined $first->[1]{retry_after_s}, 'b2 (terminal) has no retry time')
    or diag(explain($first->[1]));
like($diags[-1][1]{headers}{'retry-after'} // '', qr/^\d+$/,
     'Retry-After from the earliest timer');

# 2 s later every answer (either worker, memoized or not) counts from now
sleep(2.1);
my $later = 1;
for (1 .. 6) {
    $r = chat('none');
    my $s = ($r->{json}{diagnostics}{excluded} // [])->[0]{retry_after_s};
    $later = 0 unless defined $s && $s < $first->[0]{retry_after_s};
}
ok($later, 'two seconds later b1\'s retry time is shorter in every answer');
tried();

# g1's cooldown (Retry-After: 3) lapses with nothing written meanwhile:
# it is tried again

$m->clear;
$r = chat('lapse');
is(tried(), 'g1 g2', 'lapse: g1 answered 429 (Retry-After: 3), g2 the request');

%seen = ();
for (1 .. 6) {
    $r = chat('lapse');
    $seen{tried()}++;
}
is_deeply(\%seen, { 'g2' => 6 }, 'while g1 cools: g2 alone');

my ($lapsed, $waited) = (0, 0);
while (!$lapsed && $waited < 10) {
    sleep(0.5);
    $waited += 0.5;
    $r = chat('lapse');
    $lapsed = (tried() eq 'g1 g2');
}
ok($lapsed, "once its cooldown lapsed, g1 is tried again (after ${waited} s)");
ok($waited >= 2, 'not before');

$t->check_error_log;
$t->done;
done_testing;
