#!/usr/bin/perl

# GET /status (SPEC §12): one self-contained HTML page that renders the
# provider, connection, lockout and fallback tables from the JSON API,
# loaded in headless Chromium (Debian package chromium): no console error,
# and the rows of a provider whose breaker the test opened.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(sleep);
use OmniTest;

my $chromium = `command -v chromium 2>/dev/null`;
chomp $chromium;

OmniTest::need($chromium, 'chromium not installed (Debian package chromium)');

my $t = OmniTest->new;
my $m = $t->mock('p');

my $TOKEN = 'status-0123456789-abcdef';

$ENV{OMNI_TEST_API_TOKEN} = $TOKEN;
$t->write_file('key-a1', "sk-a1~status=503\n");
$t->write_file('key-d1', "sk-d1~status=429\n");
$t->write_file('key-b1', "sk-b1\n");

$t->config(<<'EOF');
    omniroute_zone zone=omniroute:1m;

    omniroute_provider alpha url=http://127.0.0.1:%%PORT_mock_p%%/alpha
                       kind=local;
    omniroute_provider delta url=http://127.0.0.1:%%PORT_mock_p%%/delta
                       lockout=on;
    omniroute_provider beta url=http://127.0.0.1:%%PORT_mock_p%%/beta;

    omniroute_connection a1 provider=alpha key_file=%%TESTDIR%%/key-a1;
    omniroute_connection d1 provider=delta key_file=%%TESTDIR%%/key-d1;
    omniroute_connection b1 provider=beta key_file=%%TESTDIR%%/key-b1;

    omniroute_combo smart alpha/m1 beta/m2;
    omniroute_combo lock delta/gpt-5 beta/m2;

    server {
        listen 127.0.0.1:%%PORT_gw%%;

        location /v1/ {
            omniroute_pass;
        }

        location /_omniroute {
            internal;
            include %%PARAMS%%;
        }

        location /ops/ {
            omniroute_api prefix=/ops;
            omniroute_api_token env=OMNI_TEST_API_TOKEN;
        }
    }
EOF

$t->run($t->port('gw'));

my $port = $t->port('gw');

# the page itself
my $r = $t->get($port, '/ops/status');
is($r->{status}, 200, 'the page is served without a token (it holds no data)');
like($r->{headers}{'content-type'}, qr{^text/html; charset=utf-8},
     'HTML');
like($r->{headers}{'content-security-policy'} // '',
     qr/default-src 'none'.*connect-src 'self'/,
     'a CSP that allows nothing but the page and its own API');
is($r->{headers}{'x-frame-options'}, 'DENY', 'not framable');
unlike($r->{body}, qr/<(?:script|img|link|iframe)[^>]+(?:src|href)=/i,
       'no external assets');
unlike($r->{body}, qr{(?:https?:)?//[a-z0-9]}i, 'no absolute URL');

# open alpha's breaker, lock delta's model out
$t->post($port, '/v1/chat/completions', { model => 'smart' });
sleep(1.2);
$t->post($port, '/v1/chat/completions', { model => 'smart' });
$t->post($port, '/v1/chat/completions', { model => 'lock' });

$r = $t->get($port, '/ops/api/monitoring/health',
             Authorization => "Bearer $TOKEN");
like($r->{body}, qr/"alpha":\{[^}]*"state":"OPEN"/, 'alpha is OPEN');

sub browse {
    my ($url, $name) = @_;

    my $profile = $t->dir . "/chromium-$name";
    my $log = $t->dir . "/chromium-$name.log";

    my $dom = `timeout 120 $chromium --headless --no-sandbox --disable-gpu \\
        --disable-background-networking --disable-component-update \\
        --disable-sync --disable-dev-shm-usage --no-first-run \\
        --user-data-dir=$profile \\
        --enable-logging=stderr --v=0 --virtual-time-budget=8000 \\
        --dump-dom '$url' 2>$log`;

    my @console = grep { /:CONSOLE/ } split /\n/, $t->read_file($log);

    return ($dom, \@console);
}

my ($dom, $console) = browse("http://127.0.0.1:$port/ops/status#token=$TOKEN",
                             'token');

like($dom, qr/<body[^>]*data-loaded="1"/, 'the page loaded its data');
like($dom, qr/status degraded, Redis disabled, updated/, 'the summary line');
is(scalar @$console, 0, 'no console message (errors included)')
    or diag(join("\n", @$console));
like($dom, qr/<tr data-provider="alpha" data-state="OPEN">/,
     'a row for alpha with its OPEN breaker');
like($dom, qr/<tr data-provider="alpha"[^>]*>.*?<span class="badge OPEN">OPEN<\/span>/s,
     'showing the OPEN badge');
like($dom, qr/<tr data-provider="beta" data-state="CLOSED">/,
     'and beta CLOSED');
like($dom, qr/<tr data-connection="a1"[^>]*><td>a1<\/td><td>alpha<\/td>/,
     'the connection table has alpha\'s connection');
like($dom, qr/<tr data-connection="d1" data-model="gpt-5">/,
     'the lockout table has delta\'s lockout');
like($dom, qr/<tr data-reason="server_error"><td>server_error<\/td><td class="num">2<\/td>/,
     'fallbacks after server errors: 2');
unlike($dom, qr/\Q$TOKEN\E/, 'the token is not in the page');
unlike($dom, qr/sk-[adb]1/, 'no credential in the page');

# without a token: the form, and nothing else
($dom, $console) = browse("http://127.0.0.1:$port/ops/status", 'none');

like($dom, qr/<div id="err">a valid API token is needed<\/div>/,
     'without a token the page asks for one');
like($dom, qr/<form id="login">/, 'the token form is shown');
unlike($dom, qr/data-provider=/, 'and no data');

# the access log never carries the token (it travels in the fragment)
$t->stop;
unlike($t->read_file('logs/access.log'), qr/\Q$TOKEN\E/,
       'the token is not in the access log');

$t->done;

done_testing;
