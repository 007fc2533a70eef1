#!/usr/bin/perl

# Token usage of streamed answers (issue 15): the usage events of the
# three stream formats (Chat Completions' usage-only chunk, Anthropic's
# message_start + message_delta, Responses' response.completed; and Groq's
# x_groq.usage in the finishing chunk), replayed
# from the providers' real shapes, end up in omniroute_tokens_total with
# the fixture's counts; a stream without usage adds nothing (2 workers).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use OmniTest;

my $t = OmniTest->new(workers => 2);
my $m = $t->mock('p');

my $TOKEN = 'usage-0123456789-abcdef';
$ENV{OMNI_TEST_API_TOKEN} = $TOKEN;

my %keys = (
    oc => 'fixture=openai-chat,split=1',
    an => 'fixture=anthropic-messages,split=1',
    rs => 'fixture=openai-responses',
    gq => 'fixture=groq-chat,split=1',
    nu => 'sse=3',
);

$t->key_files(\%keys);

my $decl = join '', map { <<"EOF" } sort keys %keys;
    omniroute_provider p$_ url=http://127.0.0.1:%%PORT_mock_p%%/$_;
    omniroute_connection c$_ provider=p$_ key_file=%%TESTDIR%%/key-$_;
    omniroute_model m$_ p$_/up-$_;
EOF

$t->config($decl . <<'EOF');
    omniroute_zone zone=omniroute:1m;

    server {
        listen 127.0.0.1:%%PORT_gw%%;

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

for my $k (sort keys %keys) {
    my $r = $t->post($gw, '/v1/chat/completions',
                     '{"model":"m' . $k . '","stream":true,'
                     . '"messages":[{"role":"user","content":"hi"}]}');
    is($r->{status}, 200, "$k: the stream answered");
}

# the four streams with usage, each counted in its log phase
my $text = $t->get_until($gw, '/metrics', sub {
    my @n = $_[0] =~ /^omniroute_tokens_total\{provider="p(?:an|gq|oc|rs)",[^}]*type="prompt"\}/mg;
    return @n == 4;
}, Authorization => "Bearer $TOKEN")->{body};
diag(join "\n", grep { /tokens/ } split /\n/, $text) if $ENV{DIAG};

sub tokens {
    my ($k, $type) = @_;
    my $re = 'omniroute_tokens_total\{provider="p' . $k . '",connection="c'
             . $k . '",model="m' . $k . '",type="' . $type . '"\} (\d+)';
    return $text =~ /^$re$/m ? $1 : undef;
}

# openai-chat.sse: the usage-only chunk
is(tokens('oc', 'prompt'), 2095, 'chat: prompt tokens');
is(tokens('oc', 'completion'), 89, 'chat: completion tokens');
is(tokens('oc', 'cached'), 1792, 'chat: cached tokens');

# anthropic-messages.sse: input in message_start, output in message_delta
is(tokens('an', 'prompt'), 2095, 'anthropic: input tokens (message_start)');
is(tokens('an', 'completion'), 89,
   'anthropic: output tokens (the final message_delta)');
is(tokens('an', 'cached'), 1800, 'anthropic: cache read tokens');

# openai-responses.sse: response.completed
is(tokens('rs', 'prompt'), 2095, 'responses: input tokens');
is(tokens('rs', 'completion'), 40, 'responses: output tokens');
is(tokens('rs', 'reasoning'), 28, 'responses: reasoning tokens');

# groq-chat.sse: the usage in the finishing chunk's x_groq
is(tokens('gq', 'prompt'), 48, 'groq: prompt tokens (x_groq.usage)');
is(tokens('gq', 'completion'), 12, 'groq: completion tokens');

ok(!defined tokens('nu', 'prompt'), 'a stream without usage adds nothing');

$t->done;
done_testing;
