#!/usr/bin/perl

# R-BUDGET-1, R-BUDGET-3, R-BUDGET-4: per-key rate limits and budgets
# (omniroute_client_key_limit), 2 workers sharing the counters: requests
# per minute and output tokens per minute refused with 429, Retry-After
# and a JSON error naming the limit, no provider call; the x-ratelimit-*
# headers on every answer (anthropic-ratelimit-* on /v1/messages); a
# key-and-model rule; the concurrency cap; the usage, runtime limits
# (runtime over nginx.conf) and reset in the admin API; config errors.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time sleep);
use OmniTest;

my $t = OmniTest->new(workers => 2);
my $m = $t->mock('p');

my $TOKEN = 'budget-api-0123456789abcdef';
$ENV{OMNI_TEST_API_TOKEN} = $TOKEN;

my %KEY = map { $_ => "sk-client-$_-0123456789abcdef" }
          qw(rpm tok conc mod free);

for my $k (keys %KEY) {
    $t->write_file("client-$k", "$KEY{$k}\n");
}

$t->write_file('key-a', "sk-up-a\n");
$t->write_file('key-slow', "sk-up-slow~delay=1500\n");

my $COMMON = <<'EOF';
    omniroute_zone zone=omniroute:1m;

    omniroute_provider alpha url=http://127.0.0.1:%%PORT_mock_p%%/alpha;
    omniroute_provider slow url=http://127.0.0.1:%%PORT_mock_p%%/slow;
    omniroute_connection a provider=alpha key_file=%%TESTDIR%%/key-a;
    omniroute_connection s provider=slow key_file=%%TESTDIR%%/key-slow;
    omniroute_model gpt-4o alpha/gpt-4o;
    omniroute_model mini alpha/mini;
    omniroute_model claude alpha/claude;
    omniroute_model slow slow/m;
EOF

###########################################################################
# configuration errors

for my $bad (
    ['omniroute_client_key_limit k9 requests_per_minute=1;',
     qr/client key limit in .* names unknown client key "k9"/],
    ['omniroute_client_key_limit rpm model=gpt-4o;',
     qr/client key limit "rpm" sets no limit/],
    ['omniroute_client_key_limit rpm requests_per_minute=0;',
     qr/invalid number in "requests_per_minute=0"/],
    ['omniroute_client_key_limit rpm requests_per_minute=ten;',
     qr/invalid number in "requests_per_minute=ten"/],
    ['omniroute_client_key_limit rpm tokens_per_week=5;',
     qr/invalid parameter "tokens_per_week=5" of client key limit "rpm"/],
    ['omniroute_client_key_limit rpm concurrent=1 concurrent=2;',
     qr/duplicate "concurrent=2"/],
    ['omniroute_client_key_limit rpm model=a,b concurrent=1;',
     qr/invalid "model=a,b"/],
    ['omniroute_client_key_limit rpm concurrent=1; '
     . 'omniroute_client_key_limit rpm tokens_per_day=9;',
     qr/client key "rpm" has limits twice/])
{
    $t->config($COMMON . <<"EOF");
    omniroute_client_key rpm file=%%TESTDIR%%/client-rpm;
    $bad->[0]
    server { listen 127.0.0.1:%%PORT_gw%%; location /v1/ { omniroute_pass; } }
EOF
    my ($rc, $out) = $t->test_config;
    isnt($rc, 0, "rejected: $bad->[0]");
    like($out, $bad->[1], 'with a message naming the problem')
        or diag($out);
}

###########################################################################
# a gateway with limits

$t->config($COMMON . <<'EOF');
    omniroute_client_key rpm file=%%TESTDIR%%/client-rpm;
    omniroute_client_key tok file=%%TESTDIR%%/client-tok;
    omniroute_client_key conc file=%%TESTDIR%%/client-conc;
    omniroute_client_key mod file=%%TESTDIR%%/client-mod;
    omniroute_client_key free file=%%TESTDIR%%/client-free;

    omniroute_client_key_limit rpm requests_per_minute=3;
    omniroute_client_key_limit tok output_tokens_per_minute=100
                               input_tokens_per_minute=10k
                               tokens_per_day=1m;
    omniroute_client_key_limit conc concurrent=1;
    omniroute_client_key_limit mod model=mini requests_per_minute=1;
    omniroute_client_key_limit mod tokens_per_month=1000000;

    server {
        listen 127.0.0.1:%%PORT_gw%%;

        location /v1/ {
            omniroute_pass;
        }

        location /_omniroute {
            internal;
            include %%PARAMS%%;
        }

        location /api/ {
            omniroute_api;
            omniroute_api_token env=OMNI_TEST_API_TOKEN;
        }

        location = /metrics {
            omniroute_api;
            omniroute_api_token env=OMNI_TEST_API_TOKEN;
        }
    }
EOF

$t->run($t->port('gw'));

my $gw = $t->port('gw');
my $chat = '/v1/chat/completions';

sub auth { (Authorization => "Bearer $KEY{$_[0]}") }

sub api {
    my ($method, $path, $doc) = @_;
    my $body = defined $doc ? JSON::PP::encode_json($doc) : undef;
    my $r = $t->http($gw, OmniTest::request_text($method, $path, $body,
        Authorization => "Bearer $TOKEN",
        defined $body ? ('Content-Type' => 'application/json') : ()));
    $r->{json} = OmniTest::json($r) // {};
    return $r;
}

sub rule {
    my ($key, $model) = @_;
    my $doc = api('GET', "/api/keys/budgets?key=$key")->{json};
    for my $b (@{$doc->{budgets} // []}) {
        return $b if ($b->{model} // '') eq ($model // '');
    }
    return undef;
}

# a request is settled when its pool is freed: wait for none in flight
sub settled {
    my ($key) = @_;
    my $deadline = time + 10;
    while (time < $deadline) {
        my $r = rule($key);
        return 1 if $r && $r->{in_flight} == 0;
        sleep 0.05;
    }
    return 0;
}

# the minute windows are fixed UTC minutes: a check of several requests
# starts early in one (waits at most 20 s; a condition, not a guess)
sub fresh_minute {
    my $s = time % 60;
    return if $s < 40;
    my $deadline = time + 25;
    sleep 0.1 while time % 60 >= 40 && time < $deadline;
}

sub seen { scalar @{$m->requests} }

# requests per minute, and the headers counting down

fresh_minute();

for my $i (1 .. 3) {
    my $r = $t->post($gw, $chat, { model => 'gpt-4o' }, auth('rpm'));
    is($r->{status}, 200, "rpm: request $i of 3 answered");
    is($r->{headers}{'x-ratelimit-limit-requests'}, 3,
       "rpm: request $i: x-ratelimit-limit-requests");
    is($r->{headers}{'x-ratelimit-remaining-requests'}, 3 - $i,
       "rpm: request $i: x-ratelimit-remaining-requests");
    like($r->{headers}{'x-ratelimit-reset-requests'} // '', qr/^(?:\d+m)?\d+s$|^\d+ms$/,
         "rpm: request $i: x-ratelimit-reset-requests is a duration");
    ok(!exists $r->{headers}{'x-ratelimit-limit-tokens'},
       "rpm: request $i: no token limit, no token headers");
}

$m->clear;
my $r = $t->post($gw, $chat, { model => 'gpt-4o' }, auth('rpm'));
is($r->{status}, 429, 'rpm: the 4th in the minute is refused');
my $doc = OmniTest::json($r) // {};
is($doc->{error}{type}, 'rate_limit_error', 'rpm: OpenAI error type');
is($doc->{error}{code}, 'rate_limit_exceeded', 'rpm: its code');
is($doc->{error}{limit}, 'requests_per_minute', 'rpm: the limit named');
like($doc->{error}{message}, qr/requests_per_minute \(3\)/,
     'rpm: the message names it and its value');
like($r->{headers}{'retry-after'} // '', qr/^\d+$/, 'rpm: Retry-After');
ok(($r->{headers}{'retry-after'} // 0) >= 1
   && $r->{headers}{'retry-after'} <= 60, 'rpm: at most the minute');
is($r->{headers}{'x-ratelimit-remaining-requests'}, 0,
   'rpm: the refusal carries the headers too');
is(seen(), 0, 'rpm: no provider call for the refusal');

my $free = $t->post($gw, $chat, { model => 'gpt-4o' }, auth('free'));
is($free->{status}, 200, 'a key without limits is not limited');
ok(!exists $free->{headers}{'x-ratelimit-limit-requests'},
   'and its answers carry no rate-limit headers');

# output tokens per minute: max_tokens reserved, the real usage settled

fresh_minute();

$r = $t->post($gw, $chat, { model => 'gpt-4o', max_tokens => 60 },
              auth('tok'));
is($r->{status}, 200, 'tok: max_tokens 60 of 100 admitted');
is($r->{headers}{'x-ratelimit-limit-tokens'}, 100,
   'tok: x-ratelimit-limit-tokens is the tightest token limit');
is($r->{headers}{'x-ratelimit-remaining-tokens'}, 40,
   'tok: remaining counts the reservation');
ok(settled('tok'), 'tok: settled');

my $b = rule('tok');
is($b->{limits}{output_tokens_per_minute}{used}, 7,
   'tok: settled on the real completion tokens (7)');
is($b->{limits}{input_tokens_per_minute}{used}, 11,
   'tok: and the real prompt tokens (11)');
is($b->{limits}{tokens_per_day}{used}, 18, 'tok: the day counts both');
is($b->{limits}{output_tokens_per_minute}{reserved}, 0,
   'tok: nothing reserved any more');

$r = $t->post($gw, $chat, { model => 'gpt-4o', max_tokens => 90 },
              auth('tok'));
is($r->{status}, 200, 'tok: 7 used + 90 fits in 100');
ok(settled('tok'), 'tok: settled again');

$m->clear;
$r = $t->post($gw, $chat, { model => 'gpt-4o', max_tokens => 90 },
              auth('tok'));
is($r->{status}, 429, 'tok: 14 used + 90 does not');
$doc = OmniTest::json($r) // {};
is($doc->{error}{limit}, 'output_tokens_per_minute', 'tok: the limit named');
is(seen(), 0, 'tok: no provider call');
ok($r->{headers}{'retry-after'}, 'tok: Retry-After');

# Anthropic's names on /v1/messages

$r = $t->post($gw, '/v1/messages',
              { model => 'claude', max_tokens => 10,
                messages => [{ role => 'user', content => 'hi' }] },
              'x-api-key' => $KEY{tok}, 'anthropic-version' => '2023-06-01');
is($r->{status}, 200, 'messages: answered');
is($r->{headers}{'anthropic-ratelimit-output-tokens-limit'}, 100,
   'messages: anthropic-ratelimit-output-tokens-limit');
like($r->{headers}{'anthropic-ratelimit-output-tokens-reset'} // '',
     qr/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/,
     'messages: the reset is an RFC 3339 time');
is($r->{headers}{'anthropic-ratelimit-input-tokens-limit'}, 10000,
   'messages: input tokens apart (10k)');
ok(defined $r->{headers}{'anthropic-ratelimit-tokens-remaining'},
   'messages: anthropic-ratelimit-tokens-remaining');
ok(!exists $r->{headers}{'x-ratelimit-limit-tokens'},
   'messages: not the OpenAI names');

# a rule of a key and a model

fresh_minute();

$r = $t->post($gw, $chat, { model => 'mini' }, auth('mod'));
is($r->{status}, 200, 'mod: mini once');
$r = $t->post($gw, $chat, { model => 'mini' }, auth('mod'));
is($r->{status}, 429, 'mod: mini twice in a minute: refused');
$doc = OmniTest::json($r) // {};
is($doc->{error}{model}, 'mini', 'mod: the error names the rule\'s model');
$r = $t->post($gw, $chat, { model => 'gpt-4o' }, auth('mod'));
is($r->{status}, 200, 'mod: another model of the key is not limited');
ok(settled('mod'), 'mod: settled');
is(rule('mod')->{limits}{tokens_per_month}{used}, 36,
   'mod: the key\'s own rule counted both answers (2 x 18)');
is(rule('mod', 'mini')->{refused}{requests_per_minute}, 1,
   'mod: the refusal counted on the model rule');

# concurrency

my $s1 = $t->start_post($gw, $chat, { model => 'slow' }, auth('conc'));
my $deadline = time + 10;
sleep 0.05 while time < $deadline && (rule('conc')->{in_flight} // 0) < 1;
is(rule('conc')->{in_flight}, 1, 'conc: one in flight');
$r = $t->post($gw, $chat, { model => 'slow' }, auth('conc'));
is($r->{status}, 429, 'conc: a second at once is refused');
is((OmniTest::json($r) // {})->{error}{code}, 'concurrency_limit_exceeded',
   'conc: its code');
is($r->{headers}{'retry-after'}, 1, 'conc: Retry-After 1');
is(OmniTest::finish($s1)->{status}, 200, 'conc: the first answered');
ok(settled('conc'), 'conc: none in flight after it');
is($t->post($gw, $chat, { model => 'gpt-4o' }, auth('conc'))->{status}, 200,
   'conc: then admitted');

# the admin API: runtime limits over nginx.conf, reset

$r = api('PATCH', '/api/keys/budgets',
         { key => 'free', limits => { requests_per_minute => 1 } });
is($r->{status}, 200, 'api: PATCH a runtime limit');
is($r->{json}{limits}{requests_per_minute}{source}, 'runtime',
   'api: its source is runtime');

fresh_minute();
api('POST', '/api/keys/budgets/reset', { key => 'free' });
is($t->post($gw, $chat, { model => 'gpt-4o' }, auth('free'))->{status}, 200,
   'api: the runtime limit admits one');
$r = $t->post($gw, $chat, { model => 'gpt-4o' }, auth('free'));
is($r->{status}, 429, 'api: ... and refuses the next (both workers)');

$r = api('POST', '/api/keys/budgets/reset', { key => 'free' });
is($r->{json}{reset}, 1, 'api: reset one rule');
is($t->post($gw, $chat, { model => 'gpt-4o' }, auth('free'))->{status}, 200,
   'api: after the reset, admitted again');

$r = api('PATCH', '/api/keys/budgets',
         { key => 'rpm', limits => { requests_per_minute => undef } });
is($r->{json}{limits}{requests_per_minute}{source}, 'nginx.conf',
   'api: null goes back to nginx.conf');
$r = api('PATCH', '/api/keys/budgets',
         { key => 'rpm', limits => { requests_per_minute => 0 } });
is($r->{json}{limits}{requests_per_minute}{limit}, 0,
   'api: 0 is no limit, at runtime');
is($t->post($gw, $chat, { model => 'gpt-4o' }, auth('rpm'))->{status}, 200,
   'api: the key is no longer limited');

for my $bad (
    [{ key => 'nope', limits => { concurrent => 1 } }, 404, 'unknown_key'],
    [{ key => 'rpm', model => 'zz', limits => { concurrent => 1 } }, 404,
     'unknown_key'],
    [{ key => 'rpm', limits => { tokens_per_week => 1 } }, 400,
     'invalid_request'],
    [{ key => 'rpm', limits => { concurrent => -1 } }, 400,
     'invalid_request'],
    [{ key => 'rpm', limits => { concurrent => '3' } }, 400,
     'invalid_request'],
    [{ key => 'rpm', limits => {} }, 400, 'invalid_request'],
    [{ key => 'rpm', limits => { concurrent => 1 }, x => 1 }, 400,
     'unknown_field'])
{
    $r = api('PATCH', '/api/keys/budgets', $bad->[0]);
    is($r->{status}, $bad->[1], 'api: bad PATCH ' . JSON::PP::encode_json(
       $bad->[0]) . " is $bad->[1]");
    is($r->{json}{error}{code}, $bad->[2], "api: ... $bad->[2]");
}

is(rule('rpm')->{limits}{concurrent}{limit}, 0,
   'api: a refused PATCH changed nothing');

# the metrics

my $text = api('GET', '/metrics')->{body} // '';
like($text, qr/^omniroute_client_key_budget_refusals_total\{key="rpm",model="",limit="requests_per_minute"\} 1$/m,
     'metrics: the refusal by key and limit');
like($text, qr/^omniroute_client_key_budget_refusals_total\{key="mod",model="mini",limit="requests_per_minute"\} 1$/m,
     'metrics: a model rule\'s refusal');
like($text, qr/^omniroute_client_key_budget_tokens_total\{key="tok",model="",type="output"\} (\d+)$/m,
     'metrics: settled tokens by type');
my ($out_tokens) = $text =~ /^omniroute_client_key_budget_tokens_total\{key="tok",model="",type="output"\} (\d+)$/m;
is($out_tokens, 21, 'metrics: tok settled 3 x 7 output tokens');
like($text, qr/^omniroute_client_key_budget_in_flight\{key="conc",model=""\} 0$/m,
     'metrics: in flight');
like($text, qr/^omniroute_client_key_budget_remaining\{key="tok",model="",limit="output_tokens_per_minute"\} \d+$/m,
     'metrics: remaining of a configured limit');
unlike($text, qr/^omniroute_client_key_budget_remaining\{key="free",model="",limit="tokens_per_day"/m,
     'metrics: no remaining for a limit not set');
unlike($text, qr/sk-client-/, 'metrics: never a key');

$r = api('GET', '/api/keys/budgets');
is(scalar @{$r->{json}{budgets}}, 6, 'api: every key\'s rule, and the '
   . 'model rule');
is(api('GET', '/api/keys/budgets?key=nope')->{status}, 404,
   'api: an unknown key is 404');

# a reload keeps the counters and the runtime limits, by rule name

my $tokens = rule('tok')->{tokens}{output};
$t->reload;
is(rule('tok')->{tokens}{output}, $tokens, 'reload: the counters stay');
is(rule('free')->{limits}{requests_per_minute}{source}, 'runtime',
   'reload: the runtime limit stays');
is(rule('mod', 'mini')->{refused}{requests_per_minute}, 1,
   'reload: a model rule keeps its slot');

$t->done;
done_testing;
