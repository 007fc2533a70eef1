#!/usr/bin/perl

# R-PACE-2/4 after the client's stream started: a probed stream whose
# header and keep-alives went out (docs/streams.md) and whose attempt is
# paced (a 429 error event that states its wait) is re-queued; when the
# queue cannot serve it (every connection paused past its budget:
# R-PACE-4), its stream ends with an in-band error event, never with a
# second header.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP;
use OmniTest;

my $t = OmniTest->new;
my $p = $t->mock('p');
my $q = $t->mock('q');

$ENV{OMNIROUTE_REQUEST_BUDGET_MS} = 3000;

$t->write_file('key-a1', "sk-a1\n");
$t->write_file('key-a2', "sk-a2\n");

$t->config(<<'EOF', main => 'env OMNIROUTE_REQUEST_BUDGET_MS;');
    omniroute_zone zone=omniroute:1m;

    omniroute_provider p url=http://127.0.0.1:%%PORT_mock_p%%/v1
                       kind=apikey;
    omniroute_provider q url=http://127.0.0.1:%%PORT_mock_q%%/v1
                       kind=apikey;

    omniroute_connection a1 provider=p key_file=%%TESTDIR%%/key-a1
                         pacing=on;
    omniroute_connection a2 provider=q key_file=%%TESTDIR%%/key-a2
                         pacing=on;

    omniroute_combo duo wait=off p/gpt q/gpt;

    server {
        listen 127.0.0.1:%%PORT_gw%%;

        omniroute_stream_keepalive 200ms;
        omniroute_stream_keepalive_interval 200ms;

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

my $wait = 'Rate limit reached for requests. Please try again in 20s.';

# a2 is paused for 20 s (its own request is answered at once: R-PACE-4)

$q->set_behavior('status=429,body='
                 . uri(encode_json({ error => { message => $wait,
                                                type => 'requests' } })));

my $r = $t->post($gw, '/v1/chat/completions', { model => 'q/gpt' });
is($r->{status}, 503, 'a2 paused: its caller gets 503 at once');
like($t->error_log, qr/connection "a2" paced for 20000 ms/, 'a2 paced');

# the stream: a1 is held (a2 is left), keep-alives go out, then a1's
# 429 error event pauses a1 too; both paused past the budget

$p->set_behavior('fixture=openai-chat-rate-limit-wait,beats=4,beat=200');

$r = $t->post($gw, '/v1/chat/completions',
              { model => 'duo', stream => JSON::PP::true });

is($r->{status}, 200, 'the early 200 header');
like($r->{body}, qr/\A(: keep-alive\n\n)+data: \{"error":[^\n]*\n\n\z/,
     'keep-alives, then an in-band error event')
    or diag($r->{body});
my ($data) = $r->{body} =~ /^data: (\{.*\})$/m;
my $err = eval { decode_json($data // '') };
is($err && $err->{error}{status}, 429, '... with the 429 it stands for')
    or diag($data);
is($err && $err->{error}{retry_after}, 20, '... and its stated wait');
unlike($r->{body}, qr/\[DONE\]/, 'no [DONE]');

like($t->error_log, qr/connection "a1" paced for 20000 ms/, 'a1 paced');
unlike($t->error_log, qr/header already sent/, 'no second header');
is(scalar @{$q->requests}, 1, 'a2 got no attempt of the stream');

$t->done;
done_testing();

sub uri {
    my ($s) = @_;
    $s =~ s/([^A-Za-z0-9_.~-])/sprintf('%%%02X', ord $1)/ge;
    return $s;
}
