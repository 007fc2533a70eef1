#!/usr/bin/perl

# R-CD-2, R-CD-4: connection cooldowns grow exponentially (base x 2^level)
# and a concurrent burst of failures (20 parallel 429s, both workers)
# raises backoff_level once.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(sleep time);
use OmniTest;

my $t = OmniTest->new;
my $m = $t->mock('p');

$t->write_file('key', "sk-1\n");

$t->config(<<'EOF');
    omniroute_zone zone=omniroute:1m;

    omniroute_provider p url=http://127.0.0.1:%%PORT_mock_p%%/v1
                       kind=apikey cooldown_base=1s;
    omniroute_connection c1 provider=p key_file=%%TESTDIR%%/key;

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

sub cooldown_left {
    my $r = $t->post($gw, '/v1/chat/completions', { model => 'p/m' });
    return undef unless $r->{status} == 503;
    return OmniTest::json($r)->{diagnostics}{excluded}[0]{retry_after_s};
}

# a burst: 20 requests in flight at once (the provider answers 429 after
# 500 ms), on both workers
$m->set_behavior('status=429,delay=500');

my @socks = map { $t->start_post($gw, '/v1/chat/completions',
                                  '{"model":"p/m"}') } 1 .. 20;
my $n429 = grep { OmniTest::finish($_, 5)->{status} == 429 } @socks;

is($n429, 20, 'the burst: twenty clients got the provider\'s 429');
is(scalar @{$m->requests}, 20, 'twenty attempts were in flight together');

# level 0 -> the burst set one cooldown of base x 2^0 = 1 s and raised
# backoff_level to 1, once
my $left = cooldown_left();
is($left, 1, 'R-CD-4 the burst set a single 1 s cooldown');

sleep(1.1);
$m->set_behavior('status=429');
$m->clear;

my $r = $t->post($gw, '/v1/chat/completions', { model => 'p/m' });
is($r->{status}, 429, 'after the cooldown the connection is tried again');
is(cooldown_left(), 2,
   'R-CD-4 R-CD-2 next failure: base x 2^1 = 2 s (the burst counted once)');

sleep(2.1);
$r = $t->post($gw, '/v1/chat/completions', { model => 'p/m' });
is(cooldown_left(), 4, 'R-CD-2 then base x 2^2 = 4 s');

# a success clears the level (R-CD-7)
sleep(4.1);
$m->set_behavior(undef);
$r = $t->post($gw, '/v1/chat/completions', { model => 'p/m' });
is($r->{status}, 200, 'R-CD-7 a success');
$m->set_behavior('status=429');
$r = $t->post($gw, '/v1/chat/completions', { model => 'p/m' });
is(cooldown_left(), 1, 'R-CD-7 ... reset the backoff to base x 2^0');

$t->done;
done_testing;
