#!/usr/bin/perl

# The attempt trail: with omniroute_attempt_trail on, X-OmniRoute-Trail
# lists each attempt ("connection;status-or-reason;duration"), for a
# success after fallbacks, a provider error given to the client and a
# transport failure; $omniroute_trail holds the same in the access log,
# whether the header is on or not.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use OmniTest;

my $t = OmniTest->new;
my $m = $t->mock('p');

$t->write_file('key-a1', "sk-a1~status=503\n");
$t->write_file('key-a2', "sk-a2~status=429,retry=1\n");
$t->write_file('key-b1', "sk-b1\n");
$t->write_file('key-h1', "sk-h1~hang\n");
$t->write_file('key-d1', "sk-d1\n");

$t->config(<<'EOF');
    log_format trail '$request_uri $status trail="$omniroute_trail"';

    omniroute_provider alpha url=http://127.0.0.1:%%PORT_mock_p%%/alpha;
    omniroute_provider beta url=http://127.0.0.1:%%PORT_mock_p%%/beta;
    omniroute_provider gamma url=http://127.0.0.1:%%PORT_mock_p%%/gamma;
    omniroute_provider hang url=http://127.0.0.1:%%PORT_mock_p%%/hang;
    omniroute_provider dead url=http://127.0.0.1:%%PORT_dead%%/dead;

    omniroute_connection a1 provider=alpha key_file=%%TESTDIR%%/key-a1;
    omniroute_connection a2 provider=alpha key_file=%%TESTDIR%%/key-a2;
    omniroute_connection b1 provider=beta key_file=%%TESTDIR%%/key-b1;
    omniroute_connection g1 provider=gamma key_file=%%TESTDIR%%/key-a1;
    omniroute_connection g2 provider=gamma key_file=%%TESTDIR%%/key-a2;
    omniroute_connection h1 provider=hang key_file=%%TESTDIR%%/key-h1;
    omniroute_connection d1 provider=dead key_file=%%TESTDIR%%/key-d1;

    omniroute_combo smart alpha/m beta/m;
    omniroute_combo broken gamma/m;    # state of its own (the zone is
                                       # shared: alpha cooled above)
    omniroute_combo far dead/m hang/m beta/m;

    server {
        listen 127.0.0.1:%%PORT_gw%%;
        access_log %%TESTDIR%%/logs/trail.log trail;

        location /v1/ {
            omniroute_pass;
            omniroute_attempt_trail on;
            omniroute_resend_after_timeout on;  # the hanging one falls over
        }

        location /quiet/ {
            omniroute_pass;
        }

        location /_omniroute {
            internal;
            include %%PARAMS%%;
            proxy_read_timeout 300ms;
        }
    }
EOF

$t->run($t->port('gw'));
my $gw = $t->port('gw');

my $r = $t->post($gw, '/v1/chat/completions', { model => 'smart' });
is($r->{status}, 200, 'smart: served by b1 after two failures');
is($r->{headers}{'x-omniroute-attempts'}, 3, 'three attempts');
like($r->{headers}{'x-omniroute-trail'} // '',
     qr/^a1;503;\d+ms, a2;429;\d+ms, b1;200;\d+ms$/,
     'the trail: each connection, its status and its time');

$r = $t->post($gw, '/v1/chat/completions', { model => 'broken' });
is($r->{status}, 429, 'broken: the last provider error');
like($r->{headers}{'x-omniroute-trail'} // '',
     qr/^g1;503;\d+ms, g2;429;\d+ms$/, 'the trail of a failed request');

$r = $t->post($gw, '/v1/chat/completions', { model => 'far' });
is($r->{status}, 200, 'far: past a dead port and a hanging provider');
like($r->{headers}{'x-omniroute-trail'} // '',
     qr/^d1;transport;\d+ms, h1;timeout;(\d+)ms, b1;200;\d+ms$/,
     'transport failures show their reason');
my ($hung) = ($r->{headers}{'x-omniroute-trail'} // '') =~ /h1;timeout;(\d+)ms/;
cmp_ok($hung // 0, '>=', 250, 'the timed-out attempt took proxy_read_timeout');

$r = $t->post($gw, '/quiet/chat/completions', { model => 'smart' });
is($r->{status}, 200, 'the quiet location');
ok(!exists $r->{headers}{'x-omniroute-trail'},
   'no trail header without omniroute_attempt_trail');

$r = $t->post($gw, '/v1/chat/completions', { model => 'nope' });
ok(!exists $r->{headers}{'x-omniroute-trail'}, 'no trail without attempts');

$t->stop;

my $log = $t->read_file('logs/trail.log');
like($log, qr{^/v1/chat/completions 200 trail="a1;503;\d+ms, a2;429;\d+ms, b1;200;\d+ms"$}m,
     '$omniroute_trail in the access log');
like($log, qr{^/quiet/chat/completions 200 trail="[^"]*b1;200;\d+ms"$}m,
     'also where the header is off');
like($log, qr{^/v1/chat/completions 404 trail="-"$}m,
     'not found ("-") without attempts');

$t->done;

done_testing;
