#!/usr/bin/perl

# Reloads keep the zone's state whatever its size: nginx re-creates a zone
# whose size (or name) changed, and the store copies every record of the
# previous one into it, the most protective first.  16m -> 8m -> 32m, a
# renamed zone, then a 64k zone that cannot hold every session pin: an
# OPEN breaker, a cooldown, a terminal state, a model lockout, a runtime
# setting, a session pin and the counters survive each step (2 workers).
# A zone whose layout word is not this module's is refused with EMERG and
# the running configuration goes on.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use File::Path qw(remove_tree);
use JSON::PP;
use Time::HiRes qw(time sleep);
use OmniTest;
use OmniStore qw(chat api metrics reasons);

my $t = OmniTest->new;
my $m = $t->mock('p');

my $TOKEN = 'adm-0123456789-abcdefghij';
$ENV{OMNI_TEST_API_TOKEN} = $TOKEN;

$t->write_file('key-b1', "sk-b1~status=503\n");
$t->write_file('key-c1', "sk-c1~status=429,retry=600\n");
$t->write_file('key-t1', "sk-t1~status=402\n");
$t->write_file('key-l1', "sk-l1~status=503\n");
$t->write_file('key-f1', "sk-f1\n");
$t->write_file('key-f2', "sk-f2\n");

sub configure {
    my ($zone) = @_;

    $t->config(<<"EOF");
    omniroute_zone zone=$zone;

    omniroute_provider brk url=http://127.0.0.1:%%PORT_mock_p%%/brk
                       kind=local breaker_reset=10m cooldown_base=1ms
                       cooldown_max=5ms;
    omniroute_provider cd url=http://127.0.0.1:%%PORT_mock_p%%/cd;
    omniroute_provider lo url=http://127.0.0.1:%%PORT_mock_p%%/lo
                       lockout=on;
    omniroute_provider fast url=http://127.0.0.1:%%PORT_mock_p%%/fast;

    omniroute_model_lockout off base=10m max=1h;

    omniroute_connection b1 provider=brk key_file=%%TESTDIR%%/key-b1;
    omniroute_connection c1 provider=cd key_file=%%TESTDIR%%/key-c1
                         priority=1;
    omniroute_connection t1 provider=cd key_file=%%TESTDIR%%/key-t1
                         priority=2;
    omniroute_connection l1 provider=lo key_file=%%TESTDIR%%/key-l1;
    omniroute_connection f1 provider=fast key_file=%%TESTDIR%%/key-f1;
    omniroute_connection f2 provider=fast key_file=%%TESTDIR%%/key-f2;

    omniroute_combo rr strategy=round-robin fast/m;

    omniroute_api_token env=OMNI_TEST_API_TOKEN;

${\ OmniStore::gateway_server(
    v1 => ['omniroute_max_attempts 2', 'omniroute_session_affinity 1h'])}
EOF
}

configure('omniroute:16m');
$t->run($t->port('gw'));
my $gw = $t->port('gw');
OmniStore::node($t, $TOKEN);

sub pinned_to {
    my ($session) = @_;
    my %seen = map {
        (chat('rr', 'X-Session-Id' => $session)->{headers}
             {'x-omniroute-connection'} // 'none') => 1
    } 1 .. 4;
    return join ',', sort keys %seen;
}

# reload into a new configuration and wait for the new workers' zone
sub reload_into {
    my ($zone, $size) = @_;
    my $log = length $t->error_log;
    configure($zone);
    $t->reload;
    for (1 .. 100) {
        last if substr($t->error_log, $log) =~ /records carried over/
                && (metrics()->{omniroute_zone_size_bytes} // 0) == $size;
        sleep(0.1);
    }
    return substr($t->error_log, $log);
}

###########################################################################
# the state

for (1 .. 2) {
    chat('brk/m');
    sleep(0.05);
}
chat('cd/m');
chat('lo/big');

my $r = api('PATCH', '/api/resilience',
            { providers => { fast => { breaker => {
                                 open_threshold => 4 } } } });
is($r->{status}, 200, 'a runtime setting');

my $pin = pinned_to('keep-me');
like($pin, qr/^f[12]$/, "a session pinned to $pin");

my $requests = api('GET', '/api/monitoring/health')->{json}{stats}{requests}
    {success};

sub in_force {
    my ($when) = @_;

    my $h = api('GET', '/api/monitoring/health')->{json};
    is($h && $h->{providers}{brk}{state}, 'OPEN', "$when: breaker OPEN");
    ok($h && $h->{stats}{requests}{success} >= $requests,
       "$when: the request counters go on");

    my $cd = api('GET', '/api/resilience/cooldowns?provider=cd')->{json};
    my %c = map { $_->{id} => $_ } @{$cd ? $cd->{connections} : []};
    is($c{c1} && $c{c1}{status}, 'cooldown', "$when: c1 cooling down");
    is($c{t1} && $c{t1}{terminal}, 'credits_exhausted',
       "$when: t1 in its terminal state");

    my $lo = api('GET', '/api/resilience/model-cooldowns?connection=l1')
        ->{json};
    is($lo && $lo->{count}, 1, "$when: the model lockout of l1");

    my $s = api('GET', '/api/resilience')->{json};
    is($s && $s->{providers}{fast}{breaker}{open_threshold}, 4,
       "$when: the runtime setting");
    is($s && $s->{providers}{fast}{sources}{breaker}{open_threshold},
       'runtime', "$when: from the runtime");

    is(reasons(chat('brk/m')), 'b1:circuit_open', "$when: routing: breaker");
    is(reasons(chat('cd/m')), 'c1:provider_cooldown,t1:terminal',
       "$when: routing: cooldown and terminal state");
    is(reasons(chat('lo/big')), 'l1:model_lockout', "$when: routing: lockout");
    is(pinned_to('keep-me'), $pin, "$when: the session is still pinned");
}

in_force('16m');

###########################################################################
# 16m -> 8m -> 32m, then another name

for my $step (['omniroute:8m', 8 << 20, '8m'],
              ['omniroute:32m', 32 << 20, '32m'],
              ['state:32m', 32 << 20, 'renamed'])
{
    my ($zone, $size, $name) = @$step;
    my ($zname) = split /:/, $zone;
    my $log = reload_into($zone, $size);

    like($log, qr/\[notice\].*omniroute\ zone\ "$zname"
                   .*\ records\ carried\ over\ from\ the\ previous\ zone/x,
         "$name: logged at notice");
    my ($n) = $log =~ /: (\d+) records carried over/;
    ok($n && $n >= 9, "$name: every record carried (" . ($n // 0) . ')');
    unlike($log, qr/did not fit/, "$name: nothing was dropped");
    is(metrics()->{omniroute_zone_size_bytes}, $size, "$name: the new zone");

    in_force($name);
}

###########################################################################
# a zone too small for every pin: what does not fit is named at warn, the
# protective state is carried first

for my $i (1 .. 300) {
    chat('rr', 'X-Session-Id' => "many-$i");
}
ok(metrics()->{'omniroute_zone_records{table="session_pin"}'} > 300,
   'more than 300 pins in the 32m zone');
is(pinned_to('keep-me'), $pin, 'keep-me is the most recent pin');

my $log = reload_into('state:64k', 64 << 10);

like($log, qr/\[warn\].*omniroute\ zone\ "state"\ of\ 64K:\ \d+\ records
               \ of\ the\ previous\ zone\ did\ not\ fit\ and\ were\ dropped
               \ \(\d+\ session_pin\)/x,
     '64k: the pins that did not fit, at warn');
my $v = metrics();
ok($v->{'omniroute_zone_records{table="session_pin"}'} > 10,
   '64k: the most recent pins were kept');
is($v->{'omniroute_zone_records{table="breaker"}'}, 2, '64k: both breakers');

in_force('64k');

###########################################################################
# a zone of another layout is refused: the running configuration goes on

my $patched = patch_layout($t->master_pid);

SKIP: {
    skip('cannot write the master process memory', 5) unless $patched;

    my $log = length $t->error_log;
    $t->reload;
    sleep(0.5);
    like(substr($t->error_log, $log),
         qr/\[emerg\].*omniroute\ zone\ "state"\ has\ layout\ [0-9a-f]{16}
            \ while\ this\ module\ uses\ [0-9a-f]{16}/x,
         'layout: the same zone is refused at emerg');

    configure('state:128k');
    $t->reload;
    sleep(0.5);
    like(substr($t->error_log, $log),
         qr/\[emerg\].*omniroute\ zone\ "state"\ of\ the\ previous
            \ configuration\ has\ layout/x,
         'layout: the previous zone, for a zone of another size, too');

    $v = metrics();
    is($v->{omniroute_zone_size_bytes}, 64 << 10,
       'layout: the running configuration goes on');
    is(reasons(chat('brk/m')), 'b1:circuit_open',
       'layout: with its state');

    $t->stop;

    my @bad = grep { /\[(alert|emerg|crit)\]|exited on signal|Sanitizer/
                     && !/has layout [0-9a-f]{16} while this module uses/ }
        split /\n/, $t->error_log;
    ok(!@bad, 'layout: no other alert, emerg or crash')
        or diag(join "\n", @bad);

    remove_tree($t->dir) unless $ENV{TEST_NGINX_LEAVE};
}

$t->done unless $patched;
done_testing;


# the layout word of the zone in the master's memory: magic "OMNR" (LE
# 52 4e 4d 4f) in its upper half, the version in the byte below
sub patch_layout {
    my ($pid) = @_;

    no warnings 'portable';

    open my $maps, '<', "/proc/$pid/maps" or return 0;
    my @maps = grep { m{^\S+ rw-s .*/dev/zero} } <$maps>;
    close $maps;

    open my $mem, '+<:raw', "/proc/$pid/mem" or return 0;

    for (@maps) {
        my ($from, $to) = map { hex } /^([0-9a-f]+)-([0-9a-f]+)/;
        my $len = $to - $from < 65536 ? $to - $from : 65536;
        my $buf;
        sysseek($mem, $from, 0) or next;
        sysread($mem, $buf, $len) == $len or next;

        my $at = 0;
        while (($at = index($buf, "RNMO", $at)) >= 0) {
            if ($at % 8 == 4) {
                sysseek($mem, $from + $at - 1, 0) or return 0;
                my $version = ord substr($buf, $at - 1, 1);
                syswrite($mem, chr($version ^ 0x40), 1) == 1 or return 0;
                close $mem;
                return 1;
            }
            $at++;
        }
    }

    close $mem;
    return 0;
}
