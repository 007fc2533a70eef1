#!/usr/bin/perl

# R-BUDGET-2: budgets under streams and concurrency (2 workers).  Streams
# of the three formats (Chat Completions' usage chunk, Anthropic's
# message_start + message_delta, Responses' response.completed) settle on
# their real usage; an abort mid-stream is charged its reported input and
# its output reservation, an abort before the answer releases; 50
# concurrent streams against a token budget: with honest estimates the
# budget holds exactly (used <= limit), with estimates below the real
# usage the overshoot stays within the in-flight reservations' excess.
# The overshoot measured is printed (diag) for the closing note.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP;
use IO::Select;
use Time::HiRes qw(time sleep);
use OmniTest;

my $t = OmniTest->new(workers => 2);
my $m = $t->mock('p');

my $TOKEN = 'budget-streams-0123456789abcdef';
$ENV{OMNI_TEST_API_TOKEN} = $TOKEN;

my %UP = (
    oc => 'fixture=openai-chat,gap=40',
    an => 'fixture=anthropic-messages,gap=20',
    rs => 'fixture=openai-responses,gap=20',
    st => 'fixture=anthropic-messages,stall=3',
    hg => 'hang',
);

for my $k (keys %UP) {
    $t->write_file("key-$k", "sk-$k~$UP{$k}\n");
}

my %KEY = map { $_ => "sk-client-$_-0123456789abcdef" }
          qw(fmt abort honest over);

for my $k (keys %KEY) {
    $t->write_file("client-$k", "$KEY{$k}\n");
}

# the fixtures' usage: input 2095, output 89 (chat, anthropic), 40
# (responses)
my ($IN, $OUT) = (2095, 89);

# honest estimates: a body of more than 4 x 2095 bytes, max_tokens 100
my $PAD = 'x' x 8600;
my $EST_IN = int((length(encode_json({ model => 'moc', stream => JSON::PP::true,
    max_tokens => 100,
    messages => [{ role => 'user', content => $PAD }] })) + 3) / 4);
my $HONEST = 20 * ($EST_IN + 100);

# estimates below the usage: a small body, max_tokens 100
my $SMALL = encode_json({ model => 'moc', stream => JSON::PP::true,
    max_tokens => 100, messages => [{ role => 'user', content => 'hi' }] });
my $EST_SMALL = int((length($SMALL) + 3) / 4) + 100;
my $OVER = 10 * $EST_SMALL;

my $decl = join '', map { <<"EOF" } sort keys %UP;
    omniroute_provider p$_ url=http://127.0.0.1:%%PORT_mock_p%%/$_;
    omniroute_connection c$_ provider=p$_ key_file=%%TESTDIR%%/key-$_;
    omniroute_model m$_ p$_/up-$_;
EOF

$t->config($decl . <<"EOF");
    omniroute_zone zone=omniroute:1m;

    omniroute_client_key fmt file=%%TESTDIR%%/client-fmt;
    omniroute_client_key abort file=%%TESTDIR%%/client-abort;
    omniroute_client_key honest file=%%TESTDIR%%/client-honest;
    omniroute_client_key over file=%%TESTDIR%%/client-over;

    omniroute_client_key_limit fmt tokens_per_day=1m;
    omniroute_client_key_limit abort tokens_per_day=1m;
    omniroute_client_key_limit honest tokens_per_day=$HONEST;
    omniroute_client_key_limit over tokens_per_day=$OVER;

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
    }
EOF

$t->run($t->port('gw'));

my $gw = $t->port('gw');
my $chat = '/v1/chat/completions';

sub auth { (Authorization => "Bearer $KEY{$_[0]}") }

sub rule {
    my ($key) = @_;
    my $r = $t->get($gw, "/api/keys/budgets?key=$key",
                    Authorization => "Bearer $TOKEN");
    my $doc = OmniTest::json($r) // {};
    return $doc->{budgets}[0] // {};
}

sub day { rule($_[0])->{limits}{tokens_per_day} // {} }

sub settled {
    my ($key) = @_;
    my $deadline = time + 20;
    while (time < $deadline) {
        return 1 if (rule($key)->{in_flight} // -1) == 0;
        sleep 0.05;
    }
    return 0;
}

sub body {
    my ($model, %more) = @_;
    return encode_json({ model => $model, stream => JSON::PP::true,
                         max_tokens => 100,
                         messages => [{ role => 'user', content => 'hi' }],
                         %more });
}

###########################################################################
# the three formats settle on their real usage

my $used = 0;

for my $f (['oc', $chat, $OUT], ['an', '/v1/messages', $OUT],
           ['rs', '/v1/responses', 40])
{
    my ($k, $path, $out) = @$f;
    my $r = $t->post($gw, $path, body("m$k"), auth('fmt'));
    is($r->{status}, 200, "$k: the stream answered");
    is($r->{headers}{$path eq '/v1/messages'
                     ? 'anthropic-ratelimit-tokens-limit'
                     : 'x-ratelimit-limit-tokens'}, 1000000,
       "$k: the stream's headers carry the token limit");
    ok(settled('fmt'), "$k: settled");
    $used += $IN + $out;
    is(day('fmt')->{used}, $used,
       "$k: the day's usage is the stream's real usage ($IN + $out)");
}

is(rule('fmt')->{tokens}{output}, 2 * $OUT + 40, 'the output totals');

###########################################################################
# aborts

# mid-stream: message_start (input 2095) passed, the client goes away
{
    my $s = $t->start_post($gw, '/v1/messages', body('mst'), auth('abort'));
    my $sel = IO::Select->new($s);
    my ($buf, $deadline) = ('', time + 10);
    while (time < $deadline && $buf !~ /message_start/) {
        last unless $sel->can_read($deadline - time);
        last unless sysread($s, $buf, 65536, length $buf);
    }
    like($buf, qr/message_start/, 'abort: the stream started');
    close $s;
}

ok(settled('abort'), 'abort mid-stream: nothing left in flight');
is(day('abort')->{used}, $IN + 100,
   'abort mid-stream: its reported input and its output reservation');
is(day('abort')->{reserved}, 0, 'abort mid-stream: no reservation left');

# before any answer: released
{
    my $s = $t->start_post($gw, $chat, body('mhg'), auth('abort'));
    my $deadline = time + 10;
    sleep 0.05 while time < $deadline && (rule('abort')->{in_flight} // 0) < 1;
    is(rule('abort')->{in_flight}, 1, 'abort before the answer: in flight');
    close $s;
}

ok(settled('abort'), 'abort before the answer: released');
is(day('abort')->{used}, $IN + 100, 'abort before the answer: no tokens');
is(rule('abort')->{admitted}, 2, 'both were admitted');

###########################################################################
# 50 concurrent streams against a token budget

sub fifty {
    my ($key, $body) = @_;
    my @s = map { $t->start_post($gw, $chat, $body, auth($key)) } 1 .. 50;
    my %n;
    for my $s (@s) {
        my $r = OmniTest::finish($s, 30);
        my $doc = $r->{status} == 429 ? (OmniTest::json($r) // {}) : {};
        $n{$r->{status}}++;
        $n{named}++ if ($doc->{error}{limit} // '') eq 'tokens_per_day';
    }
    return \%n;
}

# honest estimates: the reservations hold the budget exactly
my $hb = encode_json({ model => 'moc', stream => JSON::PP::true,
                       max_tokens => 100,
                       messages => [{ role => 'user', content => $PAD }] });
my $n = fifty('honest', $hb);
ok(settled('honest'), 'honest: all settled');
my $h = day('honest');
my $adm = $n->{200} // 0;
cmp_ok($adm, '>=', 20, "honest: at least limit / estimate (20) admitted "
       . "($adm)");
is(($n->{200} // 0) + ($n->{429} // 0), 50, 'honest: 200 or 429, nothing '
   . 'else');
is($n->{named} // 0, $n->{429} // 0, 'honest: each 429 names the limit');
is($h->{used}, $adm * ($IN + $OUT), 'honest: used is the real usage of the '
   . 'admitted');
cmp_ok($h->{used}, '<=', $HONEST, "honest: no overshoot ($h->{used} of "
       . "$HONEST)");
diag("50 streams, honest estimates: $adm admitted, used $h->{used} of "
     . "$HONEST, overshoot " . ($h->{used} > $HONEST ? $h->{used} - $HONEST
                                                       : 0));

# estimates below the real usage: the overshoot is bounded by the excess
# of what was in flight
$n = fifty('over', $SMALL);
ok(settled('over'), 'over: all settled');
my $o = day('over');
$adm = $n->{200} // 0;
cmp_ok($adm, '>=', 1, "over: some admitted ($adm)");
cmp_ok($adm, '<=', 10, 'over: at most limit / estimate (10) in flight');
is($o->{used}, $adm * ($IN + $OUT), 'over: used is the real usage');
my $bound = $OVER + $adm * ($IN + $OUT - $EST_SMALL);
cmp_ok($o->{used}, '<=', $bound,
       "over: used <= limit + the admitted's excess ($bound)");
diag("50 streams, estimate $EST_SMALL per request, real usage " . ($IN + $OUT)
     . ": $adm admitted, used $o->{used} of $OVER, overshoot "
     . ($o->{used} - $OVER) . " (bound " . ($bound - $OVER) . ")");
my $r = $t->post($gw, $chat, $SMALL, auth('over'));
is($r->{status}, 429, 'over: past the budget, refused');

$t->done;
done_testing;
