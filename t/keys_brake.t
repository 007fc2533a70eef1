#!/usr/bin/perl

# R-BRAKE-1: failed client key checks are braked per client address, as
# limit_req counts requests (omniroute_client_key_brake rate= burst=):
# beyond the budget a request with a key is answered 429 with
# Retry-After before its key is compared (a right guess is not told
# apart from a wrong one), counted in
# omniroute_client_key_brake_rejections_total; the budget drains at the
# rate; successful checks never spend it: a client with its key is not
# slowed by its own requests.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time sleep);
use OmniTest;

my $t = OmniTest->new;
my $m = $t->mock('p');

my $KEY = 'sk-brake-good-0123456789abcdef';

$t->write_file('key-c1', "sk-c1\n");
$t->write_file('good', "$KEY\n");

# configuration errors first
for my $bad (['omniroute_client_key_brake burst=3;', qr/needs rate=/],
             ['omniroute_client_key_brake rate=0r/s;', qr/invalid rate/],
             ['omniroute_client_key_brake rate=5;', qr/invalid rate/],
             ['omniroute_client_key_brake rate=5r/s burst=-1;',
              qr/invalid burst/],
             ['omniroute_client_key_brake rate=5r/s speed=2;',
              qr/invalid parameter "speed=2"/])
{
    $t->config(<<"EOF2");
    omniroute_zone zone=omniroute:1m;
    omniroute_provider p url=http://127.0.0.1:%%PORT_mock_p%%/v1;
    omniroute_connection c1 provider=p key_file=%%TESTDIR%%/key-c1;
    omniroute_client_key good file=%%TESTDIR%%/good;
    $bad->[0]
EOF2
    my ($rc, $out) = $t->test_config;
    isnt($rc, 0, "nginx -t refuses: $bad->[0]");
    like($out, $bad->[1], '... saying why');
}

$t->config(<<'EOF2');
    omniroute_zone zone=omniroute:1m;

    omniroute_provider p url=http://127.0.0.1:%%PORT_mock_p%%/v1;
    omniroute_connection c1 provider=p key_file=%%TESTDIR%%/key-c1;
    omniroute_model cheap p/m;

    omniroute_client_key good file=%%TESTDIR%%/good;
    omniroute_client_key_brake rate=60r/m burst=3;

    server {
        listen 127.0.0.1:%%PORT_gw%%;

        location /v1/ {
            omniroute_pass;
        }

        location = /metrics {
            omniroute_api;
            omniroute_api_token off;
        }

        location /_omniroute {
            internal;
            include %%PARAMS%%;
        }
    }
EOF2

$t->run($t->port('gw'));
my $gw = $t->port('gw');
my $chat = '/v1/chat/completions';

sub with_key {
    my ($key) = @_;
    return $t->post($gw, $chat, { model => 'cheap' },
                    Authorization => "Bearer $key");
}

sub metric {
    my $body = $t->get($gw, '/metrics')->{body} // '';
    my ($v) = $body =~ /^omniroute_client_key_brake_rejections_total (\d+)$/m;
    return $v;
}

is(metric(), 0, 'R-BRAKE-1 the metric is there, 0');

# the good key, many times at once: never braked
my @ok = grep { $_->{status} == 200 } map { with_key($KEY) } 1 .. 30;
is(scalar @ok, 30, 'R-BRAKE-1 thirty requests with the key at once: all 200');

# one failure now and burst=3 more: 401 each
for my $i (1 .. 4) {
    is(with_key("sk-wrong-$i-0123456789abcdef")->{status}, 401,
       "R-BRAKE-1 wrong key $i of 4: 401");
}

my $r = with_key('sk-wrong-5-0123456789abcdef');
is($r->{status}, 429, 'R-BRAKE-1 the 5th wrong key at once: 429');
is((OmniTest::json($r) || {})->{error}{code}, 'too_many_key_failures',
   '... too_many_key_failures');
like($r->{headers}{'retry-after'} // '', qr/^[12]$/,
     '... Retry-After: 1 s (60r/m)');

$r = with_key($KEY);
is($r->{status}, 429, 'R-BRAKE-1 meanwhile the right key is not compared '
   . 'either: 429');

$r = $t->post($gw, $chat, { model => 'cheap' },
              'x-api-key' => 'sk-wrong-x-0123456789abcdef');
is($r->{status}, 429, 'R-BRAKE-1 x-api-key too');

is(metric(), 3, 'R-BRAKE-1 omniroute_client_key_brake_rejections_total 3');

# the bucket drains at the rate: within a few seconds a check is made
my $deadline = time + 10;
my $st;
while (time < $deadline) {
    $st = with_key($KEY)->{status};
    last if $st == 200;
    sleep 0.2;
}
is($st, 200, 'R-BRAKE-1 after Retry-After the key is checked again: 200');

$t->done;

done_testing;
