#!/usr/bin/perl

# R-REQ-5: a committed SSE stream reaches the client byte for byte and
# incrementally, also after a fallback; a JSON success too.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use OmniTest;

my $t = OmniTest->new;
my $m = $t->mock('p');

$t->write_file('key-bad', "sk-bad~status=502\n");
$t->write_file('key-sse', "sk-sse~sse=6,gap=300\n");

$t->config(<<'EOF');
    omniroute_zone zone=omniroute:1m;

    omniroute_provider p url=http://127.0.0.1:%%PORT_mock_p%%/v1;

    omniroute_connection bad provider=p key_file=%%TESTDIR%%/key-bad
                         priority=1;
    omniroute_connection sse provider=p key_file=%%TESTDIR%%/key-sse
                         priority=2;

    omniroute_model streamer p/stream-model;

    %%GATEWAY%%
EOF

$t->run($t->port('gw'));

my $r = $t->post_stream($t->port('gw'), '/v1/chat/completions',
    { model => 'streamer', stream => JSON::PP::true });

is($r->{status}, 200, 'R-REQ-5 stream after a fallback');
is($r->{headers}{'content-type'}, 'text/event-stream',
   'the provider\'s content type');
is($r->{headers}{'x-omniroute-connection'}, 'sse', 'from the second connection');
is($r->{headers}{'x-omniroute-attempts'}, '2', 'after two attempts');
is($r->{headers}{'cache-control'}, 'no-cache', 'provider headers pass');

# what the mock wrote, byte for byte
my $expect = '';
for my $i (1 .. 6) {
    $expect .= 'data: ' . JSON::PP->new->canonical->encode({ id => "chunk-$i",
        model => 'stream-model',
        choices => [{ delta => { content => "part $i " } }] }) . "\n\n";
}
$expect .= "data: [DONE]\n\n";

is($r->{body}, $expect, 'R-REQ-5 the SSE body is byte for byte the provider\'s');

# incremental delivery: the first event reached the client long before the
# provider finished (6 events, 300 ms apart: about 1.8 s in all)
my ($first) = grep { $_->[1] =~ /chunk-1/ } @{$r->{chunks}};
ok($first, 'the first event was received');
cmp_ok($first->[0], '<', $r->{total_time} - 1.0,
       'R-REQ-5 the first event arrived while the provider was still '
       . 'streaming') or diag("first at $first->[0], total $r->{total_time}");
cmp_ok(scalar @{$r->{chunks}}, '>=', 4,
       'the stream arrived in several reads, not at once');

# a streamed request names stream:true; the mock saw it unchanged
my $sent = JSON::PP::decode_json($m->requests->[1]{body});
ok($sent->{stream}, 'the provider got "stream": true');

$t->done;
done_testing;
