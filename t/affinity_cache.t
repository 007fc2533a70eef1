#!/usr/bin/perl

# R-AFF-1 without a session header (omniroute_cache_affinity): the turns
# of one conversation (the same system prompt and first user turn) land on
# one connection, for both workers, so its prompt cache stays warm, while
# different conversations still spread; a session header, where session
# affinity is on, still wins.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP;
use OmniTest;

my $t = OmniTest->new;
my $m = $t->mock('p');

$t->write_file("key-$_", "sk-$_\n") for qw(a b c d);

$t->config(<<'EOF');
    omniroute_zone zone=omniroute:1m;

    omniroute_provider p url=http://127.0.0.1:%%PORT_mock_p%%/v1;
    omniroute_connection a provider=p key_file=%%TESTDIR%%/key-a;
    omniroute_connection b provider=p key_file=%%TESTDIR%%/key-b;
    omniroute_connection c provider=p key_file=%%TESTDIR%%/key-c;
    omniroute_connection d provider=p key_file=%%TESTDIR%%/key-d;

    omniroute_combo rr strategy=round-robin p/m;

    server {
        listen 127.0.0.1:%%PORT_gw%% reuseport;

        location /v1/ {
            omniroute_pass;
            omniroute_cache_affinity 30m;
        }

        location /both/ {
            omniroute_pass;
            omniroute_cache_affinity 30m;
            omniroute_session_affinity 30m;
        }

        location /nopin/ {
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

# turn n of conversation $id (OpenAI chat shape)
sub turn {
    my ($id, $n) = @_;
    my @msgs = ({ role => 'system', content => 'You are a helpful agent.' },
                { role => 'user', content => "Conversation $id starts here" });
    for my $i (2 .. $n) {
        push @msgs, { role => 'assistant', content => "answer " . ($i - 1) },
                    { role => 'user', content => "follow-up $i" };
    }
    return { model => 'rr', messages => \@msgs };
}

# clients serialize a conversation the same way every turn: canonical JSON
# (Perl's hash order would differ from one request to the next)
my $json = JSON::PP->new->canonical;

sub conn {
    my ($path, $body, %h) = @_;
    my $r = $t->post($gw, $path, $json->encode($body), %h);
    return $r->{headers}{'x-omniroute-connection'} // "status $r->{status}";
}

my %one = map { conn('/v1/chat/completions', turn('one', $_)) => 1 } 1 .. 8;
is(scalar keys %one, 1,
   'R-AFF-1 eight turns of one conversation: one connection');

my %first;
for my $id (1 .. 8) {
    my %turns = map { conn('/v1/chat/completions', turn("c$id", $_)) => 1 }
                1 .. 3;
    is(scalar keys %turns, 1, "R-AFF-1 conversation c$id stays put");
    $first{(keys %turns)[0]}++;
}
cmp_ok(scalar keys %first, '>=', 3,
       'R-AFF-1 eight conversations spread over the connections')
    or diag(explain \%first);

my %nopin = map { conn('/nopin/chat/completions', turn('one', $_)) => 1 }
            1 .. 4;
is(scalar keys %nopin, 4, 'without cache affinity the turns rotate');

# Anthropic shape: a top-level system prompt
my %anth;
for my $n (1 .. 4) {
    my @msgs = ({ role => 'user', content => 'Claude, start' });
    push @msgs, { role => 'assistant', content => 'ok' },
                { role => 'user', content => "next $_" } for 2 .. $n;
    $anth{conn('/v1/messages', { model => 'rr', system => 'Be terse.',
                                 max_tokens => 5, messages => \@msgs })} = 1;
}
is(scalar keys %anth, 1, 'R-AFF-1 an Anthropic conversation stays put');

# another system prompt with the same first turn is another conversation
my %sys;
for my $p (1 .. 6) {
    my $b = turn('one', 1);
    $b->{messages}[0]{content} = "prompt $p";
    $sys{conn('/v1/chat/completions', $b)} = 1;
}
cmp_ok(scalar keys %sys, '>=', 3, 'the system prompt is part of it');

# a session header wins where session affinity is on
my %sess = map { conn('/both/chat/completions', turn("s$_", 1),
                      'X-Session-Id' => 'one-session') => 1 } 1 .. 6;
is(scalar keys %sess, 1,
   'R-AFF-1 six conversations of one session: the session\'s connection');

# a session header where only cache affinity is on: the conversation counts
my %cs = map { conn('/v1/chat/completions', turn('one', $_),
                    'X-Session-Id' => "other-$_") => 1 } 1 .. 4;
is_deeply([keys %cs], [keys %one],
          'cache affinity without session affinity ignores the session');

ok(!grep({ exists $_->{headers}{'x-session-id'} } @{$m->requests}),
   'no session header reached the provider');

$t->done;
done_testing;
