#!/usr/bin/perl

# R-REQ-5, R-CLASS-1: a 200 SSE stream whose first meaningful event is an
# error still falls over (omniroute_stream_probe, on by default); a
# content event commits the stream, which then flows incrementally.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use OmniTest;

my $t = OmniTest->new;
my $m = $t->mock('p');

$t->write_file('key-quota', "sk-q~sseerr=insufficient_quota,ping=1\n");
$t->write_file('key-over', "sk-o~sseerr=overloaded_error,anthropic=1\n");
$t->write_file('key-sse', "sk-s~sse=5,gap=300\n");

$t->config(<<'EOF2');
    omniroute_zone zone=omniroute:1m;

    omniroute_provider a url=http://127.0.0.1:%%PORT_mock_p%%/a;
    omniroute_provider b url=http://127.0.0.1:%%PORT_mock_p%%/b;
    omniroute_provider s url=http://127.0.0.1:%%PORT_mock_p%%/s;

    omniroute_connection quota provider=a key_file=%%TESTDIR%%/key-quota;
    omniroute_connection over provider=b key_file=%%TESTDIR%%/key-over;
    omniroute_connection sse provider=s key_file=%%TESTDIR%%/key-sse;

    omniroute_combo chain a/m b/m s/m;
    omniroute_combo direct s/m a/m;

    server {
        listen 127.0.0.1:%%PORT_gw%%;

        location /v1/ {
            omniroute_pass;
        }

        location /off/ {
            omniroute_pass;
            omniroute_stream_probe off;
        }

        location /_omniroute {
            internal;
            include %%PARAMS%%;
        }
    }
EOF2

$t->run($t->port('gw'));
my $gw = $t->port('gw');

my $r = $t->post_stream($gw, '/v1/chat/completions',
                        { model => 'chain', stream => JSON::PP::true });
is($r->{status}, 200, 'R-REQ-5 the client gets a stream');
is($r->{headers}{'x-omniroute-attempts'}, '3',
   'R-REQ-5 after two error events inside 200 streams');
is($r->{headers}{'x-omniroute-connection'}, 'sse', 'from the third');
unlike($r->{body}, qr/error/, 'R-REQ-5 no error event reached the client');
like($r->{body}, qr/part 5 .*\[DONE\]/s, 'the whole good stream did');

# the error events were classified: insufficient_quota cools the
# connection for long
$r = $t->post($gw, '/v1/chat/completions', { model => 'a/m' });
is($r->{status}, 503, 'R-CLASS-2 the quota error event cooled "quota"');
my $ex = OmniTest::json($r)->{diagnostics}{excluded}[0];
ok($ex->{retry_after_s} > 3000, 'R-CLASS-2 for a long time (quota)')
    or diag(explain $ex);

# a stream that starts with content is committed at once and flows
$r = $t->post_stream($gw, '/v1/chat/completions',
                     { model => 'direct', stream => JSON::PP::true });
is($r->{headers}{'x-omniroute-attempts'}, '1', 'a good stream: one attempt');
my ($first) = grep { $_->[1] =~ /chunk-1/ } @{$r->{chunks}};
cmp_ok($first->[0], '<', $r->{total_time} - 0.8,
       'R-REQ-5 its first event reached the client while it was streaming');

# with omniroute_stream_probe off the error event is the client's
$t->restart($gw);
$r = $t->post_stream($gw, '/off/chat/completions',
                     { model => 'chain', stream => JSON::PP::true });
is($r->{headers}{'x-omniroute-attempts'}, '1',
   'omniroute_stream_probe off: no fallback');
like($r->{body}, qr/insufficient_quota/, 'the error event went through');

$t->done;
done_testing;
