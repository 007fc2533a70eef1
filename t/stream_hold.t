#!/usr/bin/perl

# R-REQ-5, R-STREAM-1 (issues 11, 27): a stream is held up to
# omniroute_error_body_buffer_size before its commit point, whatever the
# hold's memory starts at (4 KiB, doubled as more is held).  A Responses
# stream whose response.created echoes 40 KB of instructions, sent in two
# writes, and then fails still falls over, and nothing of it reaches the
# client; past the bound the stream is committed as it is, the error log
# says so, and the client gets its bytes whole.  The same with a smaller
# bound (8k) in a location.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use OmniTest;

my $t = OmniTest->new;
my $m = $t->mock('p');

my $FAIL = 'fixture=openai-responses-failed-after-created,split=1,stall=3';

my %keys = (
    'echo-40k' => "$FAIL,echo=40000",
    'echo-70k' => "$FAIL,echo=70000",
    'echo-6k'  => "$FAIL,echo=6000",
    'echo-9k'  => "$FAIL,echo=9000",
    'ok'       => 'fixture=openai-responses,split=1',
);

my $providers = $t->providers_per_key('p', \%keys);

$t->config(<<"EOF");
    omniroute_zone zone=omniroute:1m;

$providers

    omniroute_combo c40 echo-40k/m ok/m;
    omniroute_combo c70 echo-70k/m ok/m;
    omniroute_combo c6 echo-6k/m ok/m;
    omniroute_combo c9 echo-9k/m ok/m;

    server {
        listen 127.0.0.1:%%PORT_gw%%;

        location /v1/ {
            omniroute_pass;
        }

        location /small/v1/ {
            omniroute_pass;
            omniroute_error_body_buffer_size 8k;
        }

        location /_omniroute {
            internal;
            include %%PARAMS%%;
            proxy_read_timeout 10s;
        }
    }
EOF

$t->run($t->port('gw'));
my $gw = $t->port('gw');

sub stream {
    my ($path, $combo) = @_;
    return $t->post_stream($gw, $path,
                           { model => $combo, stream => JSON::PP::true,
                             input => 'hello' });
}

sub falls_over {
    my ($path, $combo, $what) = @_;
    my $r = stream($path, $combo);
    is($r->{status}, 200, "$what: a stream");
    is($r->{headers}{'x-omniroute-attempts'}, '2', "$what: two attempts");
    is($r->{headers}{'x-omniroute-connection'}, 'ok', "$what: from ok");
    unlike($r->{body}, qr/careful coding agent|response\.failed/,
           "$what: nothing of the held stream reached the client");
    like($r->{body}, qr/response\.completed/, "$what: the good stream did");
}

sub committed {
    my ($path, $combo, $conn, $echo, $bound, $what) = @_;
    my $r = stream($path, $combo);
    is($r->{status}, 200, "$what: a stream");
    is($r->{headers}{'x-omniroute-attempts'}, '1', "$what: one attempt");
    is($r->{headers}{'x-omniroute-connection'}, $conn, "$what: committed");
    my ($created) = $r->{body} =~ /"instructions":"([^"]*)"/;
    is(length($created // ''), $echo,
       "$what: the client got the $echo bytes of instructions whole");
    like($r->{body}, qr/response\.failed/,
         "$what: and the failure event after it");
    like($t->error_log,
         qr/no content in the first $bound bytes of the stream of "$conn", committed/,
         "$what: the error log names the bound ($bound)");
}

falls_over('/v1/responses', 'c40', '40 KB held (bound 64k)');
committed('/v1/responses', 'c70', 'echo-70k', 70000, 65536,
          '70 KB over the bound 64k');
falls_over('/small/v1/responses', 'c6', '6 KB held (bound 8k)');
committed('/small/v1/responses', 'c9', 'echo-9k', 9000, 8192,
          '9 KB over the bound 8k');

# the 40 KB stream again, while the 70 KB one is committed: each
# request's hold is its own
my $r = stream('/v1/responses', 'c40');
is($r->{headers}{'x-omniroute-connection'}, 'ok',
   'the 40 KB stream still falls over after the others');

$t->done;
done_testing;
