#!/usr/bin/perl

# R-CONC-1, R-CONF-3: per-model concurrency caps on a connection
# (model_caps=, the exact upstream model, with max_concurrent) hold across
# both workers; an allowed-model list (models=) leaves the connection out
# of every other model's routes; a per-connection rate-limit reset
# (rate_limit_reset=) comes after an upstream hint (R-CD-3).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(sleep time);
use OmniTest;

my $t = OmniTest->new;
my $m = $t->mock('p');

$t->write_file('key-a', "sk-a\n");
$t->write_file('key-b', "sk-b\n");
$t->write_file('key-429', "sk-429~status=429\n");
$t->write_file('key-429h', "sk-429h~status=429,retry=5\n");

$t->config(<<'EOF');
    omniroute_zone zone=omniroute:1m;

    omniroute_provider p url=http://127.0.0.1:%%PORT_mock_p%%/v1;
    omniroute_provider q url=http://127.0.0.1:%%PORT_mock_p%%/q;
    omniroute_provider r1 url=http://127.0.0.1:%%PORT_mock_p%%/r1;
    omniroute_provider r2 url=http://127.0.0.1:%%PORT_mock_p%%/r2;

    omniroute_connection a provider=p key_file=%%TESTDIR%%/key-a
                         max_concurrent=4 model_caps=m1:1,llama3:8b:2;
    omniroute_connection b provider=p key_file=%%TESTDIR%%/key-b
                         models=m2,m3;
    omniroute_connection qa provider=q key_file=%%TESTDIR%%/key-a
                         models=x;
    omniroute_connection reset provider=r1 key_file=%%TESTDIR%%/key-429
                         rate_limit_reset=2s;
    omniroute_connection hint provider=r2 key_file=%%TESTDIR%%/key-429h
                         rate_limit_reset=2s;

    omniroute_combo rr1 strategy=round-robin p/m1;
    omniroute_combo rr2 strategy=round-robin p/m2;
    omniroute_combo llama p/llama3:8b;

    server {
        listen 127.0.0.1:%%PORT_gw%% reuseport;

        location /v1/ {
            omniroute_pass;
        }

        location /_omniroute {
            internal;
            include %%PARAMS%%;
        }
    }
EOF

$t->run($t->port('gw'));
my $gw = $t->port('gw');

sub conn {
    my ($model) = @_;
    my $r = $t->post($gw, '/v1/chat/completions', { model => $model });
    return $r->{headers}{'x-omniroute-connection'} // "status $r->{status}";
}

# allowed models: b serves m2 and m3 only
my %c1 = map { conn('rr1') => 1 } 1 .. 6;
is_deeply([sort keys %c1], ['a'],
          'R-CONF-3 models=m2,m3: b is no route of m1');
my %c2 = map { conn('rr2') => 1 } 1 .. 6;
is_deeply([sort keys %c2], ['a', 'b'], 'R-CONF-3 ... and is one of m2');
is(conn('p/m3'), 'a', 'a direct model: a first (priority order)');

my $r = $t->post($gw, '/v1/chat/completions', { model => 'q/y' });
is($r->{status}, 404, 'R-CONF-3 no connection may serve the model: 404');
is(OmniTest::json($r)->{error}{code}, 'no_executable_targets',
   'code no_executable_targets');

# per-model caps, both workers: m1 at most 1 in flight on a, llama3:8b 2,
# while other models use the rest of max_concurrent=4
$m->set_behavior('delay=500');
$m->clear;

my @s = map { $t->start_post($gw, '/v1/chat/completions',
                             { model => 'rr1' }) } 1 .. 3;
push @s, map { $t->start_post($gw, '/v1/chat/completions',
                              { model => 'llama' }) } 1 .. 3;
my @r = map { OmniTest::finish($_, 10) } @s;
is(scalar(grep { $_->{status} == 200 } @r), 6, 'R-CONC-1 all six served');

my $req = $m->requests;
my @m1 = sort { $a <=> $b } map { $_->{time} }
         grep { $_->{body} =~ /"m1"/ } @$req;
my @ll = sort { $a <=> $b } map { $_->{time} }
         grep { $_->{body} =~ /llama3:8b/ } @$req;

ok(@m1 == 3 && $m1[1] - $m1[0] >= 0.45 && $m1[2] - $m1[1] >= 0.45,
   'R-CONC-1 model_caps m1:1: one m1 attempt at a time')
    or diag(join ' ', map { $_ - $m1[0] } @m1);
ok(@ll == 3 && $ll[1] - $ll[0] < 0.3 && $ll[2] - $ll[0] >= 0.45,
   'R-CONC-1 model_caps llama3:8b:2 (a model name with ":"): two at a time')
    or diag(join ' ', map { $_ - $ll[0] } @ll);

# the connection's max_concurrent=4 still counts every model
$m->clear;
@s = map { $t->start_post($gw, '/v1/chat/completions',
                          { model => 'p/m3' }) } 1 .. 6;
@r = map { OmniTest::finish($_, 10) } @s;
my @on_a = sort { $a <=> $b } map { $_->{time} }
           grep { $_->{headers}{authorization} eq 'Bearer sk-a' }
           @{$m->requests};
is(scalar(grep { $_->{status} == 200 } @r), 6, 'six m3 requests served');
ok(@on_a <= 4, 'R-CONC-1 at most 4 at once on a, the rest on b')
    or diag(scalar @on_a);
$m->set_behavior(undef);

# rate_limit_reset=2s: a 429 without a hint cools the connection 2 s (the
# apikey backoff would be 3 s); an upstream Retry-After wins over it
$r = $t->post($gw, '/v1/chat/completions', { model => 'r1/m' });
is($r->{status}, 429, 'a 429 without a hint');
$r = $t->post($gw, '/v1/chat/completions', { model => 'r1/m' });
is(OmniTest::json($r)->{diagnostics}{excluded}[0]{retry_after_s}, 2,
   'R-CD-3 the per-connection reset: a 2 s cooldown');

$r = $t->post($gw, '/v1/chat/completions', { model => 'r2/m' });
$r = $t->post($gw, '/v1/chat/completions', { model => 'r2/m' });
ok(OmniTest::json($r)->{diagnostics}{excluded}[0]{retry_after_s} >= 4,
   'R-CD-3 Retry-After 5 wins over the per-connection reset');

# nginx -t names what is wrong
$t->stop_nginx;

for my $case (
    [ 'model_caps=m1', qr/invalid "model_caps=m1" of connection "c": expected MODEL:N,\.\.\. with N 1\.\.100000/ ],
    [ 'model_caps=m1:0', qr/invalid "model_caps=m1:0" of connection "c"/ ],
    [ 'model_caps=m1:1,m1:2', qr/duplicate model "m1" in "model_caps=m1:1,m1:2" of connection "c"/ ],
    [ 'models=', qr/invalid "models=" of connection "c": expected a list of upstream models/ ],
    [ 'models=a,,b', qr/invalid "models=a,,b" of connection "c"/ ],
    [ 'rate_limit_reset=31d', qr/invalid "rate_limit_reset=31d" of connection "c": expected a time of 1ms\.\.30d/ ],
    [ 'rate_limit_reset=soon', qr/invalid "rate_limit_reset=soon" of connection "c"/ ],
) {
    my ($arg, $re) = @$case;
    $t->config(<<"EOF");
    omniroute_provider p url=http://x/v1;
    omniroute_connection c provider=p key_file=%%TESTDIR%%/key-a $arg;
EOF
    my ($rc, $out) = $t->test_config;
    isnt($rc, 0, "R-CONF-5 $arg is refused");
    like($out, $re, "R-CONF-5 $arg: the message") or diag($out);
}

$t->config(<<'EOF');
    omniroute_provider p url=http://x/v1;
    omniroute_combo c wait=maybe p/m;
EOF
my ($rc, $out) = $t->test_config;
like($out, qr/invalid "wait=maybe" of combo "c": expected wait=on or wait=off/,
     'R-CONF-5 wait=maybe is refused');

$t->done;
done_testing;
