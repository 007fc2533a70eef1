#!/usr/bin/perl

# The demo configuration `make demo` starts (conf.d/run-demo.sh with
# conf.d/demo.conf, also shipped in the Debian package): the README's
# first command.  It listens on its fixed ports (8080, 8081, 8091-8093),
# as the README says; the fallback, the cooldown after it, the alias and
# /v1/models answer as run-demo.sh tells the operator they will.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use IO::Socket::INET;
use POSIX qw(setsid);
use Time::HiRes qw(time sleep);
use OmniTest ();

my $top = "$FindBin::Bin/..";
my $t = OmniTest->new;
my $prefix = $t->dir . '/demo';

for my $p (8080, 8081, 8091, 8092, 8093) {
    my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1:$p");
    BAIL_OUT("port $p is in use: the demo needs it") if $s;
}

my $pid = fork // die "fork: $!";
if ($pid == 0) {
    setsid();
    $ENV{OMNIROUTE_DEMO_PREFIX} = $prefix;
    open STDOUT, '>', $t->dir . '/demo.out' or die;
    open STDERR, '>&', \*STDOUT or die;
    exec 'bash', "$top/conf.d/run-demo.sh" or die "exec: $!";
}

END { kill 'TERM', -$pid if $pid; }

ok($t->wait_port(8080) && $t->wait_port(8081), 'the demo listens');

my $body = '{"model":"smart","messages":[{"role":"user","content":"hi"}]}';
my $r = $t->post(8080, '/v1/chat/completions', $body,
                 Authorization => 'Bearer my-gateway-key');
is($r->{status}, 200, 'smart: 200');
is($r->{headers}{'x-omniroute-connection'}, 'steady-1', '... from steady');
is($r->{headers}{'x-omniroute-attempts'}, 2, '... after flaky');
like($r->{headers}{'x-omniroute-trail'} // '',
     qr/^flaky-1;503;\d+ms, steady-1;200;\d+ms$/, '... the trail says so');
like($r->{body}, qr/Hello from steady \(key Bearer sk-demo-steady\)/,
     "steady saw its own key, not the client's");

$r = $t->post(8080, '/v1/chat/completions', $body);
is($r->{headers}{'x-omniroute-attempts'}, 1,
   'again: flaky cools down, steady answers at once');

$r = $t->post(8080, '/v1/chat/completions', '{"model":"flaky/gpt-4o"}');
is($r->{status}, 503, 'flaky alone while it cools down: 503');
like($r->{headers}{'retry-after'} // '', qr/^\d+$/, '... with Retry-After');

$r = $t->post(8080, '/v1/chat/completions', '{"model":"gpt-4o"}');
like($r->{body}, qr/"model":"gpt-4o-2024-08-06"/, 'the alias');

$r = $t->get(8080, '/v1/models');
like($r->{body}, qr/"id":"smart"/, '/v1/models lists the combo');

$r = $t->post(8080, '/v1/messages', '{"model":"claude/claude-sonnet-4"}');
like($r->{body}, qr/anthropic-version 2023-06-01/,
     'claude: the provider header');

$r = $t->get(8081, '/api/monitoring/health',
             Authorization => 'Bearer demo-admin-token-0123456789');
is($r->{status}, 200, 'the admin API with the demo token');

kill 'TERM', -$pid;
my $deadline = time + 10;
sleep 0.05 while waitpid($pid, POSIX::WNOHANG()) == 0 && time < $deadline;
ok(!kill(0, $pid), 'Ctrl-C (TERM) stops it');
$pid = 0;

my $out = $t->read_file('demo.out');
unlike($out, qr/\[(alert|emerg|crit)\]/, 'no alert, emerg or crit');
my @log = grep { m{^\d{4}/\d\d/\d\d |"(GET|POST) /} } split /\n/, $out;
cmp_ok(scalar @log, '>=', 6, 'its access and error log lines');
is(scalar(grep { /sk-demo-|my-gateway-key/ } @log), 0,
   'no credential in them');

done_testing;
