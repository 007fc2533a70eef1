#!/usr/bin/perl

# The labelled metrics of the metrics zone: requests by configured model
# and outcome (queue_full and queue_timeout of their own), attempts and
# fallbacks by provider, connection, model and reason, histograms of the
# attempt, first-byte and request durations, breaker transitions, token
# usage of non-streamed answers equal to what the mock reports, and the
# cost from the connection's cost=; promtool-clean, every label a
# configured name; the counters survive a reload that changes the
# configuration.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(sleep);
use OmniTest;
use PromText;

$ENV{RATE_LIMIT_MAX_QUEUE_DEPTH} = 1;
$ENV{RATE_LIMIT_MAX_WAIT_MS} = 300;

my $t = OmniTest->new;
my $m = $t->mock('p');

my $TOKEN = 'labels-0123456789-abcdef';

$ENV{OMNI_TEST_API_TOKEN} = $TOKEN;
$t->write_file('key-a1', "sk-a1~status=503\n");
$t->write_file('key-b1', "sk-b1~usage=100:40:30:20\n");
$t->write_file('key-g1', "sk-g1~shape=anthropic,usage=20:9:4\n");
$t->write_file('key-q1', "sk-q1~delay=1200\n");
$t->write_file('key-s1', "sk-s1~sse=2,gap=50\n");

my $main = "env RATE_LIMIT_MAX_QUEUE_DEPTH;\nenv RATE_LIMIT_MAX_WAIT_MS;";

my $conf = <<'EOF';
    omniroute_zone zone=omniroute:1m;

    omniroute_provider alpha url=http://127.0.0.1:%%PORT_mock_p%%/alpha
                       kind=local;
    omniroute_provider beta url=http://127.0.0.1:%%PORT_mock_p%%/beta;
    omniroute_provider gamma url=http://127.0.0.1:%%PORT_mock_p%%/gamma
                       auth=x-api-key;
    omniroute_provider queue url=http://127.0.0.1:%%PORT_mock_p%%/queue;
    omniroute_provider sse url=http://127.0.0.1:%%PORT_mock_p%%/sse;

    omniroute_connection a1 provider=alpha key_file=%%TESTDIR%%/key-a1;
    omniroute_connection b1 provider=beta key_file=%%TESTDIR%%/key-b1
                         cost=2.5;
    omniroute_connection g1 provider=gamma key_file=%%TESTDIR%%/key-g1;
    omniroute_connection q1 provider=queue key_file=%%TESTDIR%%/key-q1
                         max_concurrent=1;
    omniroute_connection s1 provider=sse key_file=%%TESTDIR%%/key-s1;

    omniroute_model claude gamma/claude-x;
    omniroute_combo smart alpha/m1 beta/m2;
    omniroute_combo slow queue/m;
    omniroute_combo streamy sse/m beta/m;
    %%EXTRA%%

    server {
        listen 127.0.0.1:%%PORT_gw%% reuseport;

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

(my $first = $conf) =~ s/%%EXTRA%%//;
$t->config($first, main => $main);
$t->run($t->port('gw'));

my $gw = $t->port('gw');

sub scrape {
    my ($name) = @_;
    my $r = $t->get($gw, '/metrics', Authorization => "Bearer $TOKEN");
    is($r->{status}, 200, "$name: metrics answer");
    return PromText::check($t, $r->{body}, $name);
}

my $s = scrape('fresh');

is($s->{'omniroute_model_requests_total{model="smart",outcome="success"}'},
   0, 'a declared combo has its series from the start');
is($s->{'omniroute_model_requests_total{model="beta/*",outcome="success"}'},
   0, 'so has the direct slot of each provider');
is($s->{'omniroute_model_requests_total{model="(none)",outcome="client_error"}'},
   0, 'and the slot for requests without a configured model');
is($s->{'omniroute_requests_total{outcome="queue_full"}'}, 0,
   'queue_full is an outcome of its own');
is($s->{'omniroute_requests_total{outcome="queue_timeout"}'}, 0,
   'queue_timeout too');
is($s->{'omniroute_attempt_duration_seconds_count{connection="a1",provider="alpha"}'},
   0, 'an empty histogram per connection');
is($s->{'omniroute_request_duration_seconds_bucket{le="+Inf",model="smart"}'},
   0, 'an empty histogram per model');
is($s->{'omniroute_breaker_transitions_total{provider="alpha",state="OPEN"}'},
   0, 'breaker transitions from 0');

# traffic

my $r = $t->post($gw, '/v1/chat/completions', { model => 'smart' });
is($r->{status}, 200, 'smart: falls over from a1 to b1');
sleep(0.1);
$r = $t->post($gw, '/v1/chat/completions', { model => 'smart' });
is($r->{status}, 200, 'smart again: a1 cools down, b1 answers');
$r = $t->post($gw, '/v1/chat/completions', { model => 'beta/anything' });
is($r->{status}, 200, 'a direct provider/model request');
$r = $t->post($gw, '/v1/messages', { model => 'claude' });
is($r->{status}, 200, 'an alias to an Anthropic-shaped provider');
$r = $t->post($gw, '/v1/chat/completions', { model => 'no-such-model' });
is($r->{status}, 404, 'an unknown model');
$r = $t->post($gw, '/v1/chat/completions', { model => 'beta/stream',
                                              stream => JSON::PP::true });

# a stream the first-event probe holds (another attempt is possible)
$r = $t->post($gw, '/v1/chat/completions', { model => 'streamy',
                                              stream => JSON::PP::true });
is($r->{status}, 200, 'a probed stream');
like($r->{body}, qr/data: \[DONE\]/, 'streamed whole');

# the queue: one in its slot, one waiting past its budget, one refused
my @q = ($t->start_post($gw, '/v1/chat/completions', { model => 'slow' }));
sleep(0.2);
push @q, $t->start_post($gw, '/v1/chat/completions', { model => 'slow' });
sleep(0.1);
push @q, $t->start_post($gw, '/v1/chat/completions', { model => 'slow' });
my @qr = map { OmniTest::finish($_) } @q;
is_deeply([map { $_->{status} } @qr], [200, 503, 429],
          'the queue: served, timed out, full');

$s = scrape('after traffic');

is($s->{'omniroute_model_requests_total{model="smart",outcome="success"}'},
   2, 'smart: two successes');
is($s->{'omniroute_model_requests_total{model="beta/*",outcome="success"}'},
   2, 'beta/*: the two direct requests');
is($s->{'omniroute_model_requests_total{model="claude",outcome="success"}'},
   1, 'claude: one');
is($s->{'omniroute_model_requests_total{model="(none)",outcome="client_error"}'},
   1, 'the unknown model is counted under (none)');
ok(!grep({ /no-such-model/ } keys %$s), 'an unknown model never becomes a label');
ok(!grep({ /model="beta\/anything"/ } keys %$s),
   'nor does a direct upstream model name');
is($s->{'omniroute_model_requests_total{model="slow",outcome="queue_timeout"}'},
   1, 'a queue timeout is queue_timeout');
is($s->{'omniroute_model_requests_total{model="slow",outcome="queue_full"}'},
   1, 'a full queue is queue_full');
is($s->{'omniroute_requests_total{outcome="queue_full"}'}, 1,
   'and in the totals');
is($s->{'omniroute_requests_total{outcome="cooling_down"}'}, 0,
   'no longer counted as cooling_down');
is($s->{'omniroute_requests_total{outcome="success"}'}, 7,
   'the totals are the sum over the models');

is($s->{'omniroute_connection_attempts_total{connection="a1",model="smart",provider="alpha",reason="server_error"}'},
   1, 'a1 failed once for smart (then cooled down)');
is($s->{'omniroute_connection_attempts_total{connection="b1",model="smart",provider="beta",reason="none"}'},
   2, 'b1 served smart twice');
is($s->{'omniroute_connection_attempts_total{connection="b1",model="beta/*",provider="beta",reason="none"}'},
   2, 'and the direct requests under beta/*');
is($s->{'omniroute_connection_fallbacks_total{connection="a1",model="smart",provider="alpha",reason="server_error"}'},
   1, 'one fallback after a1\'s server error');

is($s->{'omniroute_breaker_transitions_total{provider="alpha",state="DEGRADED"}'},
   1, 'alpha\'s breaker went DEGRADED once');

# histograms move
is($s->{'omniroute_attempt_duration_seconds_count{connection="b1",provider="beta"}'},
   4, 'four attempts on b1 in its duration histogram');
is($s->{'omniroute_attempt_first_byte_seconds_count{connection="a1",provider="alpha"}'},
   1, 'a1\'s first byte once');
is($s->{'omniroute_request_duration_seconds_count{model="smart"}'}, 2,
   'two smart requests timed');
cmp_ok($s->{'omniroute_request_duration_seconds_sum{model="slow"}'}, '>', 1,
       'the slow requests took their time');
cmp_ok($s->{'omniroute_attempt_duration_seconds_bucket{connection="q1",le="1",provider="queue"}'},
       '<', $s->{'omniroute_attempt_duration_seconds_bucket{connection="q1",le="2.5",provider="queue"}'},
       'q1\'s 1.2 s attempt is in the 2.5 s bucket, not the 1 s one');

is($s->{'omniroute_stream_first_content_seconds_count{connection="s1",provider="sse"}'},
   1, 's1\'s first content event timed');
ok(!grep({ /omniroute_tokens_total\{connection="s1"/ } keys %$s),
   'a streamed answer gives no token counts (not read yet)');

# tokens: what the mock reported
is($s->{'omniroute_tokens_total{connection="b1",model="smart",provider="beta",type="prompt"}'},
   200, 'b1 prompt tokens for smart: 2 x 100');
is($s->{'omniroute_tokens_total{connection="b1",model="smart",provider="beta",type="completion"}'},
   80, 'completion: 2 x 40');
is($s->{'omniroute_tokens_total{connection="b1",model="smart",provider="beta",type="cached"}'},
   60, 'cached: 2 x 30');
is($s->{'omniroute_tokens_total{connection="b1",model="smart",provider="beta",type="reasoning"}'},
   40, 'reasoning: 2 x 20');
is($s->{'omniroute_tokens_total{connection="g1",model="claude",provider="gamma",type="prompt"}'},
   20, 'Anthropic input_tokens');
is($s->{'omniroute_tokens_total{connection="g1",model="claude",provider="gamma",type="completion"}'},
   9, 'Anthropic output_tokens');
is($s->{'omniroute_tokens_total{connection="g1",model="claude",provider="gamma",type="cached"}'},
   4, 'Anthropic cache_read_input_tokens');
ok(!exists $s->{'omniroute_tokens_total{connection="g1",model="claude",provider="gamma",type="reasoning"}'},
   'no reasoning series where none was given');
is($s->{'omniroute_tokens_total{connection="b1",model="beta/*",provider="beta",type="prompt"}'},
   200, 'the direct requests\' tokens');
is($s->{'omniroute_cost_total{connection="b1",model="smart",provider="beta"}'} + 0,
   (200 + 80) * 2.5 / 1e6, 'cost: (prompt + completion) x cost= per million');
ok(!grep({ /omniroute_cost_total\{connection="g1"/ } keys %$s),
   'no cost without cost=');

ok(!grep({ /sk-/ } keys %$s), 'no credential in any label');

# a reload that changes the names: counters of kept names carry over
(my $second = $conf) =~ s/%%EXTRA%%/omniroute_combo extra beta\/m3;/;
$t->config($second, main => $main);
$t->reload;
sleep(1);

$s = scrape('after a reload with a new combo');

is($s->{'omniroute_model_requests_total{model="extra",outcome="success"}'},
   0, 'the new combo has its series');
is($s->{'omniroute_model_requests_total{model="smart",outcome="success"}'},
   2, 'smart\'s count carried over');
is($s->{'omniroute_tokens_total{connection="b1",model="smart",provider="beta",type="prompt"}'},
   200, 'and its tokens');
is($s->{'omniroute_attempt_duration_seconds_count{connection="b1",provider="beta"}'},
   4, 'and b1\'s histogram');
is($s->{'omniroute_breaker_transitions_total{provider="alpha",state="DEGRADED"}'},
   1, 'and alpha\'s transitions');
like($t->error_log, qr/metrics of \d+ names carried over/,
     'the carry-over is logged');

# the same configuration again: the same zone, counting on
$t->reload;
sleep(1);
$r = $t->post($gw, '/v1/chat/completions', { model => 'smart' });
$s = scrape('after a reload without a change');
is($s->{'omniroute_model_requests_total{model="smart",outcome="success"}'},
   3, 'the same zone: smart counts on');

$t->done;

done_testing;
