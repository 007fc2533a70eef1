#!/usr/bin/perl

# R-CONC-1/2: a connection's max_concurrent holds across both workers;
# requests beyond it wait for a slot (RATE_LIMIT_MAX_WAIT_MS), a full
# queue (RATE_LIMIT_MAX_QUEUE_DEPTH) answers 429 RATE_LIMIT_QUEUE_FULL at
# once, a wait past the budget 503 SEMAPHORE_TIMEOUT; a free fallback
# connection is used instead of waiting.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(sleep time);
use OmniTest;

$ENV{RATE_LIMIT_MAX_QUEUE_DEPTH} = 1;
$ENV{RATE_LIMIT_MAX_WAIT_MS} = 2000;

my $t = OmniTest->new;
my $m = $t->mock('p');

$t->write_file("key-$_", "sk-$_\n") for qw(one two);

my $main = "env RATE_LIMIT_MAX_QUEUE_DEPTH;\nenv RATE_LIMIT_MAX_WAIT_MS;";

$t->config(<<'EOF2', main => $main);
    omniroute_zone zone=omniroute:1m;

    omniroute_provider p url=http://127.0.0.1:%%PORT_mock_p%%/v1;
    omniroute_provider q url=http://127.0.0.1:%%PORT_mock_p%%/q;
    omniroute_connection one provider=p key_file=%%TESTDIR%%/key-one
                         max_concurrent=1;
    omniroute_connection two provider=q key_file=%%TESTDIR%%/key-two;

    omniroute_combo spill p/m q/m;

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
EOF2

$t->run($t->port('gw'));
my $gw = $t->port('gw');

sub start {
    my ($model) = @_;
    return $t->start_post($gw, '/v1/chat/completions', { model => $model });
}


# two at once on a max_concurrent=1 connection: the second waits
$m->set_behavior('delay=600');
my @s = (start('p/m'), start('p/m'));
my @r = map { OmniTest::finish($_) } @s;
is_deeply([map { $_->{status} } @r], [200, 200],
          'R-CONC-1 both requests are served');
my @times = sort { $a <=> $b } map { $_->{time} } @{$m->requests};
cmp_ok($times[1] - $times[0], '>=', 0.5,
       'R-CONC-1 the provider saw the second only after the first ended');

# one in its slot, one waiting, the third finds the queue full
$m->clear;
@s = (start('p/m'));
sleep(0.15);
push @s, start('p/m');
sleep(0.15);
push @s, start('p/m');
@r = map { OmniTest::finish($_) } @s;
is($r[2]{status}, 429, 'R-CONC-2 a full queue: 429 at once');
is(OmniTest::json($r[2])->{error}{code}, 'RATE_LIMIT_QUEUE_FULL',
   'R-CONC-2 code RATE_LIMIT_QUEUE_FULL');
is($r[2]{headers}{'retry-after'}, '1',
   'issue 25: with Retry-After (a short retry)');
is($r[2]{headers}{'x-content-type-options'}, 'nosniff',
   'issue 25: the gateway\'s own JSON error says nosniff');
is_deeply([map { $_->{status} } @r[0, 1]], [200, 200],
          'the others are served');
is(scalar @{$m->requests}, 2, 'the rejected request reached no provider');

# waiting longer than the budget
$m->set_behavior('delay=3000');
@s = (start('p/m'));
sleep(0.15);
my $t0 = time;
push @s, start('p/m');
my $late = OmniTest::finish($s[1]);
my $waited = time - $t0;
is($late->{status}, 503, 'R-CONC-2 no slot within the wait budget: 503');
is(OmniTest::json($late)->{error}{code}, 'SEMAPHORE_TIMEOUT',
   'R-CONC-2 code SEMAPHORE_TIMEOUT');
is($late->{headers}{'retry-after'}, '1', 'issue 25: with Retry-After');
ok($waited > 1.8 && $waited < 2.9, 'R-CONC-2 after about 2 s')
    or diag("waited $waited s");
OmniTest::finish($s[0]);

# a free fallback connection is used instead of waiting
$m->set_behavior('delay=600');
$m->clear;
@s = (start('spill'));
sleep(0.15);
push @s, start('spill');
@r = map { OmniTest::finish($_) } @s;
is_deeply([map { $_->{headers}{'x-omniroute-connection'} } @r],
          ['one', 'two'], 'R-CONC-1 the busy connection is passed over');

$t->done;
done_testing;
