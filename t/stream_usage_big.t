#!/usr/bin/perl

# Usage of streamed events larger than the scanner keeps (issue 15): a
# Responses API response.completed that carries the whole answer (20 KiB)
# is read for usage from the attempt's buffer; one larger than the buffer
# (omniroute_error_body_buffer_size, 64k: an 80 KiB event goes out in
# parts) is skipped with an info line.  The client gets both streams
# whole.  2 workers.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(sleep);
use OmniTest;

my $t = OmniTest->new(workers => 2);
my $m = $t->mock('p');

my $TOKEN = 'usage-big-0123456789-abcdef';
$ENV{OMNI_TEST_API_TOKEN} = $TOKEN;

$t->write_file('key-lg', "sk-lg~fixture=openai-responses-long,split=1\n");
$t->write_file('key-hg', "sk-hg~fixture=openai-responses-huge\n");

$t->config(<<'EOF');
    omniroute_zone zone=omniroute:1m;

    omniroute_provider plg url=http://127.0.0.1:%%PORT_mock_p%%/lg;
    omniroute_provider phg url=http://127.0.0.1:%%PORT_mock_p%%/hg;
    omniroute_connection clg provider=plg key_file=%%TESTDIR%%/key-lg;
    omniroute_connection chg provider=phg key_file=%%TESTDIR%%/key-hg;
    omniroute_model mlg plg/up;
    omniroute_model mhg phg/up;

    server {
        listen 127.0.0.1:%%PORT_gw%%;
        error_log %%TESTDIR%%/logs/info.log info;

        location /v1/ {
            omniroute_pass;
        }

        location /_omniroute {
            internal;
            include %%PARAMS%%;
        }

        location = /metrics {
            omniroute_api;
            omniroute_api_token env=OMNI_TEST_API_TOKEN;
        }
    }
EOF

$t->run($t->port('gw'));

my $gw = $t->port('gw');
my $dir = "$FindBin::Bin/fixtures/streams";

for my $k (qw(lg hg)) {
    my $r = $t->post($gw, '/v1/responses',
                     '{"model":"m' . $k . '","stream":true,"input":"hi"}');
    is($r->{status}, 200, "$k: answered");

    my $name = $k eq 'lg' ? 'long' : 'huge';
    open my $fh, '<', "$dir/openai-responses-$name.sse" or die $!;
    my ($completed) = grep { /^data: \{"type":"response\.completed"/ } <$fh>;
    chomp $completed;
    ok(length $completed > ($k eq 'lg' ? 20000 : 80000),
       "$k: the fixture's response.completed is big");
    ok(index($r->{body}, $completed) >= 0,
       "$k: the client got it whole");
}

# a request is counted when it is logged, after its answer
my $text = $t->get_until($gw, '/metrics', sub {
    $_[0] =~ /^omniroute_tokens_total\{provider="plg",[^}]*type="prompt"\}/m
}, Authorization => "Bearer $TOKEN")->{body};

sub tokens {
    my ($k, $type) = @_;
    my $re = 'omniroute_tokens_total\{provider="p' . $k . '",connection="c'
             . $k . '",model="m' . $k . '",type="' . $type . '"\} (\d+)';
    return $text =~ /^$re$/m ? $1 : undef;
}

is(tokens('lg', 'prompt'), 3100, '20 KiB event: input tokens');
is(tokens('lg', 'completion'), 700, '20 KiB event: output tokens');
is(tokens('lg', 'cached'), 1024, '20 KiB event: cached tokens');
is(tokens('lg', 'reasoning'), 64, '20 KiB event: reasoning tokens');

ok(!defined tokens('hg', 'prompt'), '80 KiB event: not read');
like($t->read_file('logs/info.log'),
     qr/\[info\].*an event of \d+ bytes in the stream of "chg" is not read for usage/,
     '80 KiB event: an info line');

$t->done;
done_testing;
