#!/usr/bin/perl

# A zone full of protective state (2 workers): 160 connections in a
# credits_exhausted terminal state fill a 32k zone; terminal states are
# never evicted, so new records are refused instead, counted and logged
# at alert at most once a second ("could not allocate ... record");
# session pins never push out a lockout; requests are still served.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use File::Path qw(remove_tree);
use JSON::PP;
use Time::HiRes qw(time sleep);
use OmniTest;
use OmniStore qw(chat api metrics);

my $t = OmniTest->new;
my $m = $t->mock('p');

my $TOKEN = 'adm-0123456789-abcdefghij';
$ENV{OMNI_TEST_API_TOKEN} = $TOKEN;

my $N = 160;
my $conns = '';

for my $i (1 .. $N) {
    $t->write_file("key-t$i", "sk-t$i~status=402\n");
    $conns .= "    omniroute_connection t$i provider=term"
            . " key_file=%%TESTDIR%%/key-t$i priority=$i;\n";
}

$t->write_file('key-x1', "sk-x1~status=503\n");
$t->write_file('key-g1', "sk-g1\n");

$t->config(<<"EOF");
    omniroute_zone zone=omniroute:32k;

    omniroute_provider term url=http://127.0.0.1:%%PORT_mock_p%%/term;
    omniroute_provider other url=http://127.0.0.1:%%PORT_mock_p%%/other
                       kind=local;
    omniroute_provider good url=http://127.0.0.1:%%PORT_mock_p%%/good;

$conns
    omniroute_connection x1 provider=other key_file=%%TESTDIR%%/key-x1;
    omniroute_connection g1 provider=good key_file=%%TESTDIR%%/key-g1;

    omniroute_combo pinned strategy=round-robin good/m;

    omniroute_api_token env=OMNI_TEST_API_TOKEN;

${\ OmniStore::gateway_server(
    v1 => ['omniroute_max_attempts 100', 'omniroute_session_affinity 1h'])}
EOF

$t->run($t->port('gw'));
my $gw = $t->port('gw');
OmniStore::node($t, $TOKEN);

sub terminal {
    my $cd = api('GET', '/api/resilience/cooldowns?provider=term')->{json};
    return [sort map { $_->{id} }
            grep { ($_->{terminal} // '') eq 'credits_exhausted' }
            @{$cd ? $cd->{connections} : []}];
}

my $t0 = time;

# every connection of "term" answers 402: each becomes terminal, as long
# as the zone has room for its record
chat('term/m') for 1 .. 2;

my $v = metrics();
my $kept = terminal();
my $n = scalar @$kept;
ok($n > 10 && $n < $N, "the zone holds $n of the $N terminal states");
is($v->{'omniroute_zone_records{table="connection"}'}, $n,
   'one connection record each');
ok($v->{omniroute_zone_alloc_failures_total} > 0,
   'the others were refused and counted');

# a failure of another provider's connection: its records cannot evict a
# terminal state, they are refused
my $failures = $v->{omniroute_zone_alloc_failures_total};
chat('other/m') for 1 .. 3;
$v = metrics();
ok($v->{omniroute_zone_alloc_failures_total} > $failures,
   'a new cooldown is refused');
is_deeply(terminal(), $kept, 'no terminal state was evicted for it');

# session pins cannot evict protective records either; the gateway still
# serves
my $ok = 0;
$ok += chat('pinned', 'X-Session-Id' => "s-$_")->{status} == 200
    for 1 .. 100;
is($ok, 100, 'requests with session ids are served');
is_deeply(terminal(), $kept, 'no terminal state was evicted for a pin');
is(metrics()->{'omniroute_zone_records{table="connection"}'}, $n,
   'the connection records are all there');

my $took = time - $t0;

$t->stop;

my @alerts = grep { /\[alert\]/ } split /\n/, $t->error_log;
ok(@alerts, 'the refusals are logged at alert');
like($alerts[0] // '',
     qr/could\ not\ allocate\ connection\ record\ in\ omniroute
        \ zone\ "omniroute":\ \d+\ new\ records\ refused/x,
     'naming the table and the zone');
ok(!grep({ !/could\ not\ allocate\ (connection|breaker|session_pin|lockout)
             \ record\ in\ omniroute\ zone/x } @alerts),
   'and nothing else is an alert');
ok(@alerts <= int($took) + 2,
   scalar(@alerts) . " alerts in ${\ int($took + 1)} s: at most one a second");

my @bad = grep { /\[(emerg|crit)\]|exited on signal|Sanitizer/ }
    split /\n/, $t->error_log;
ok(!@bad, 'no emerg, crit or crash') or diag(join "\n", @bad);

remove_tree($t->dir) unless $ENV{TEST_NGINX_LEAVE};

done_testing;
