#!/usr/bin/perl

# A provider's answer cannot steer nginx: the control headers nginx acts
# on when an upstream sends them (X-Accel-Redirect: an internal redirect
# to any location; X-Accel-Limit-Rate, X-Accel-Buffering, X-Accel-Charset,
# X-Accel-Expires) are ignored in the attempt location (omniroute_params:
# proxy_ignore_headers).  A provider that answers with X-Accel-Redirect
# to an internal location gets its own body to the client, not that
# location's; none of the headers reaches the client.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use OmniTest;
use Time::HiRes qw(time);

my $t = OmniTest->new;
my $m = $t->mock('p');

$t->write_file('key-redirect', "sk-c1~hdr=X-Accel-Redirect:/secret\n");
$t->write_file('key-rate', "sk-c2~hdr=X-Accel-Limit-Rate:1\n");

$t->config(<<'EOF');
    omniroute_zone zone=omniroute:1m;

    omniroute_provider p url=http://127.0.0.1:%%PORT_mock_p%%/v1 kind=apikey;
    omniroute_connection c1 provider=p key_file=%%TESTDIR%%/key-redirect
                         priority=1;
    omniroute_connection c2 provider=p key_file=%%TESTDIR%%/key-rate
                         priority=2;

    omniroute_model redirect p/m-redirect;

    server {
        listen 127.0.0.1:%%PORT_gw%%;

        location /v1/ {
            omniroute_pass;
        }

        location /_omniroute {
            internal;
            include %%PARAMS%%;
        }

        location /secret {
            internal;
            return 200 "SECRET of the gateway\n";
        }
    }
EOF

$t->run($t->port('gw'));

my $body = '{"model":"redirect","messages":[{"role":"user","content":"hi"}]}';

my $r = $t->post($t->port('gw'), '/v1/chat/completions', $body);
is($r->{status}, 200, 'an answer with X-Accel-Redirect: 200');
unlike($r->{body}, qr/SECRET/, 'the internal location is not served');
like($r->{body}, qr/hello from p/, 'the provider\'s own body is');
is($r->{headers}{'x-omniroute-connection'}, 'c1', '... of the connection');
ok(!exists $r->{headers}{'x-accel-redirect'},
   'X-Accel-Redirect does not reach the client');

# c1 fails now; c2's X-Accel-Limit-Rate: 1 (one byte a second) would take
# minutes for the body; ignored, it comes at once
$t->write_file('key-redirect', "sk-c1~status=503\n");
$t->reload;

my $t0 = time;
$r = $t->post($t->port('gw'), '/v1/chat/completions', $body);
is($r->{status}, 200, 'the fallback with X-Accel-Limit-Rate: 200');
is($r->{headers}{'x-omniroute-connection'}, 'c2', '... from c2');
like($r->{body}, qr/hello from p/, '... the whole body');
cmp_ok(time - $t0, '<', 20, '... not throttled to a byte a second');
ok(!exists $r->{headers}{'x-accel-limit-rate'},
   'X-Accel-Limit-Rate does not reach the client');

$t->done;

done_testing;
